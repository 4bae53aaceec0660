#!/usr/bin/env bash
# Runs the GPU side of the project on this machine's GPUs, from an existing build, and keeps the
# logs: the GPU test suite (ctest -L gpu) and, unless --tests-only, the benchmarks.
#
#   scripts/gpu_check.sh [--tests-only | --bench-only] [--filter REGEX] [--repeat N] [LOG_DIR]
#
# --repeat N: each selected test must pass N times in a row (ctest --repeat until-fail:N), for
# failures that show only now and then (e.g. `--tests-only --filter ops_ag_gemm --repeat 10`).
#
# The topology is part of the test matrix: the suite runs once with one GPU visible (every
# in-process rank shares it; the MPI tests put two processes on it) and, on a machine with more,
# again with every GPU visible (in-process ranks round-robin over the GPUs, unevenly for odd world
# sizes; one MPI process per GPU), and with more than two GPUs the MPI tests once more with a
# process on every GPU. TILELINK_BUILD_DIR selects the build (default build/). The benchmarks
# print tables; the raw rows also go to LOG_DIR/*.csv. Exit code: 0 only if every test pass
# passed (benchmarks failing are reported, not fatal).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TILELINK_BUILD_DIR:-$root/build}"
tests=1 bench=1 filter="" repeat=1 logs=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tests-only) bench=0 ;;
    --bench-only) tests=0 ;;
    --filter) filter="$2"; shift ;;
    --repeat) repeat="$2"; shift ;;
    *) logs="$1" ;;
  esac
  shift
done
logs="${logs:-$build/gpu-logs}"
mkdir -p "$logs"

# NVLink multicast stays off: on shared machines a program using it can take the host's GPUs out of service.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# In-process ranks sharing a GPU need these before the first CUDA call (InProcessWorld checks).
export CUDA_MODULE_LOADING=EAGER CUDA_DEVICE_MAX_CONNECTIONS=32

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$logs/gpu.txt"
rc=0
# The transports of the multi-process tests (NVSHMEM when the build has it).
transports=cuda_ipc
grep -q '^TILELINK_WITH_NVSHMEM:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null && transports="cuda_ipc nvshmem"
gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"
if [ "$tests" = 1 ]; then
  args=(--test-dir "$build" -L gpu --output-on-failure)
  [ -n "$filter" ] && args+=(-R "$filter")
  [ "$repeat" -gt 1 ] && args+=(--repeat "until-fail:$repeat")
  # The first GPU this process may use (the whole list when CUDA_VISIBLE_DEVICES is unset).
  first="${CUDA_VISIBLE_DEVICES:-0}"
  first="${first%%,*}"
  echo "== ctest -L gpu, one GPU visible (CUDA_VISIBLE_DEVICES=$first)"
  CUDA_VISIBLE_DEVICES="$first" ctest "${args[@]}" 2>&1 | tee "$logs/ctest-one-gpu.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  if [ "${gpus:-0}" -gt 1 ]; then
    echo "== ctest -L gpu, all $gpus GPUs visible"
    ctest "${args[@]}" 2>&1 | tee "$logs/ctest-all-gpus.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  fi
  if [ "${gpus:-0}" -gt 2 ]; then
    for t in ll_mpi_test ops_mpi_test; do
      [ -n "$filter" ] && ! [[ "$t" =~ $filter ]] && continue
      for transport in $transports; do
        echo "== $t, one process per GPU ($gpus), transport $transport"
        TILELINK_NO_MPS=1 TILELINK_TRANSPORT=$transport "$root/tests/gpu/ll/run_mpi_test.sh" mpirun "$gpus" \
          "$build/bin/$t" --gtest_color=no 2>&1 | tee "$logs/$t-$gpus-$transport.log"
        [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
      done
    done
    if [[ "$transports" == *nvshmem* ]] && { [ -z "$filter" ] || [[ ops_mpi_test =~ $filter ]]; }; then
      echo "== ops_mpi_test, one process per GPU ($gpus), every process its own node (NVSHMEM put-with-signal)"
      TILELINK_NO_MPS=1 TILELINK_TRANSPORT=nvshmem TILELINK_ONE_NODE_PER_PROCESS=1 \
        "$root/tests/gpu/ll/run_mpi_test.sh" mpirun "$gpus" "$build/bin/ops_mpi_test" --gtest_color=no 2>&1 |
        tee "$logs/ops_mpi_test-$gpus-one-node-per-process.log"
      [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    fi
  fi
  echo "gpu_check: tests $([ $rc -eq 0 ] && echo passed || echo FAILED) (logs in $logs)"
fi
if [ "$bench" = 1 ]; then
  for cmd in primitives gemm ag_gemm gemm_rs gemm_ar allgather_ll flash_decode ag_moe moe_rs; do
    echo "== tilelink-bench $cmd"
    "$build/bin/tilelink-bench" "$cmd" --csv "$logs/$cmd.csv" 2>&1 | tee "$logs/$cmd.txt" ||
      echo "tilelink-bench $cmd failed (exit ${PIPESTATUS[0]})"
  done
fi
exit "$rc"
