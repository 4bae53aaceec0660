#!/usr/bin/env bash
# The Python package on the GPUs of this machine: its GPU tests under torchrun, one process per
# GPU (every GPU, then one), then examples/tp_mlp.py on every GPU. Uses the build tree's
# libtilelink_c.so (scripts/build.sh) and the python3 that has PyTorch.
#   scripts/python_gpu_check.sh [log-dir]
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TILELINK_BUILD_DIR:-$root/build}"
logs="${1:-$build/python-gpu-logs}"
mkdir -p "$logs"
# NVLink multicast stays off: on shared machines a program using it can take the host's GPUs out of service.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" TILELINK_LIBRARY="$build/lib/libtilelink_c.so"
export PYTHONUNBUFFERED=1

gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"
if [ "${gpus:-0}" -eq 0 ]; then echo "python_gpu_check: no GPU here"; exit 1; fi
rc=0
run() {
  local name="$1"; shift
  echo "== $name: $*"
  # A rank that fails while its peers wait in a collective would leave them waiting: bounded.
  if timeout -k 10 240 "$@" > "$logs/$name.log" 2>&1; then echo "   passed"; else echo "   FAILED (rc $?, $logs/$name.log)"; tail -30 "$logs/$name.log"; rc=1; fi
  grep -E "passed|failed|error" "$logs/$name.log" | tail -2
}
cd "$root"
run pytest_all_gpus torchrun --standalone --nproc-per-node "$gpus" -m pytest -q -p no:cacheprovider -x tests/python/test_gpu.py
if [ "$gpus" -gt 1 ]; then
  run pytest_one_gpu env CUDA_VISIBLE_DEVICES=0 torchrun --standalone --nproc-per-node 1 -m pytest -q -p no:cacheprovider -x tests/python/test_gpu.py
  run tp_mlp torchrun --standalone --nproc-per-node "$gpus" examples/tp_mlp.py
  cat "$logs/tp_mlp.log" | grep -v "^W" | tail -8
fi
exit $rc
