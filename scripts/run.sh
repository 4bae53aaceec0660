#!/usr/bin/env bash
# The main job: installs, builds, and runs every tilelink-bench benchmark on the GPUs present.
# One GPU: the benchmarks run N in-process ranks sharing it (TILELINK_RANKS, default 8).
# Several GPUs: one in-process rank per GPU. No GPU: says so, after building.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TILELINK_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"
if [ "${gpus:-0}" -eq 0 ]; then
  echo
  echo "tilelink is built ($build)."
  echo "No NVIDIA GPU on this machine: tilelink-bench needs a Hopper (sm_90) GPU, so no benchmark ran."
  echo "On a machine with one, scripts/run.sh runs: $build/bin/tilelink-bench all"
  exit 0
fi

args=(all)
if [ "$gpus" -eq 1 ]; then
  ranks="${TILELINK_RANKS:-8}"
  echo "run: 1 GPU found: every benchmark runs $ranks in-process ranks sharing that GPU"
  echo "     (each rank gets 1/$ranks of its SMs; cross-GPU bandwidth is not measured this way)"
  args+=(--ranks "$ranks")
else
  echo "run: $gpus GPUs found: every benchmark runs one in-process rank per GPU"
  if [ -n "${TILELINK_RANKS:-}" ]; then args+=(--ranks "$TILELINK_RANKS"); fi
fi
echo "run: $build/bin/tilelink-bench ${args[*]}"
exec "$build/bin/tilelink-bench" "${args[@]}"
