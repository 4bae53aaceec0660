#!/usr/bin/env bash
# The main job: installs, builds, and runs every tilelink-bench benchmark on the GPUs present.
# One GPU: the benchmarks run their in-process ranks (8 by default) all on it, and say so.
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

# Each command picks its own world sizes (tools/bench/registry.hpp: one rank per GPU, or 8 ranks
# on a single GPU); TILELINK_RANKS=N forces N in-process ranks for every command.
args=(all)
if [ -n "${TILELINK_RANKS:-}" ]; then args+=(--ranks "$TILELINK_RANKS"); fi
if [ "$gpus" -eq 1 ]; then
  echo "run: 1 GPU found: every benchmark runs its ranks in-process, all sharing this one GPU"
  echo "     (${TILELINK_RANKS:-8} ranks for the multi-rank cases; each rank gets its share of the SMs,"
  echo "     and \"peer\" traffic stays in one GPU's memory: NVLink is not measured this way)"
else
  echo "run: $gpus GPUs found: every benchmark runs one in-process rank per GPU (up to 8)"
fi
echo "run: $build/bin/tilelink-bench ${args[*]}"
exec "$build/bin/tilelink-bench" "${args[@]}"
