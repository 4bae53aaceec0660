#!/usr/bin/env bash
# Runs the GPU side of the project on this machine's GPUs, from an existing build, and keeps the
# logs: the GPU test suite (ctest -L gpu) and, unless --tests-only, the benchmarks.
#
#   scripts/gpu_check.sh [--tests-only | --bench-only] [--filter REGEX] [LOG_DIR]
#
# TILELINK_BUILD_DIR selects the build (default build/). The benchmarks print tables; the raw rows
# also go to LOG_DIR/*.csv. Exit code: ctest's (benchmarks failing are reported, not fatal).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TILELINK_BUILD_DIR:-$root/build}"
tests=1 bench=1 filter="" logs=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tests-only) bench=0 ;;
    --bench-only) tests=0 ;;
    --filter) filter="$2"; shift ;;
    *) logs="$1" ;;
  esac
  shift
done
logs="${logs:-$build/gpu-logs}"
mkdir -p "$logs"

# NVLink multicast stays off on shared machines (DESIGN.md §1.2).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$logs/gpu.txt"
rc=0
if [ "$tests" = 1 ]; then
  args=(--test-dir "$build" -L gpu --output-on-failure)
  [ -n "$filter" ] && args+=(-R "$filter")
  ctest "${args[@]}" 2>&1 | tee "$logs/ctest.log"
  rc=${PIPESTATUS[0]}
fi
if [ "$bench" = 1 ]; then
  for cmd in primitives gemm ag_gemm gemm_rs gemm_ar; do
    echo "== tilelink-bench $cmd"
    "$build/bin/tilelink-bench" "$cmd" --csv "$logs/$cmd.csv" 2>&1 | tee "$logs/$cmd.txt" ||
      echo "tilelink-bench $cmd failed (exit ${PIPESTATUS[0]})"
  done
fi
exit "$rc"
