#!/usr/bin/env bash
# Measures on a machine with several GPUs, from an existing build: the GPU tests (their
# in-process worlds put rank r on GPU r % #GPUs), the multi-process tests and benchmarks (one
# process per GPU under mpirun), and the PyTorch baselines (torchrun), all logged to LOG_DIR.
#
#   scripts/multi_gpu.sh [LOG_DIR]          (TILELINK_BUILD_DIR selects the build, default build/)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TILELINK_BUILD_DIR:-$root/build}"
logs="${1:-$build/multi-gpu-logs}"
mkdir -p "$logs"
# NVLink multicast stays off: a program using it can take the host's GPUs out of service.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# In-process ranks sharing a GPU need these before the first CUDA call (InProcessWorld checks).
export CUDA_MODULE_LOADING=EAGER CUDA_DEVICE_MAX_CONNECTIONS=32
n=$(nvidia-smi -L | grep -c '^GPU ')
echo "$n GPUs" | tee "$logs/gpus.txt"
nvidia-smi topo -m >> "$logs/gpus.txt" 2>&1
ctest --test-dir "$build" -L gpu --output-on-failure 2>&1 | tee "$logs/ctest.log"
mpi=(mpirun -np "$n" --allow-run-as-root --oversubscribe --bind-to none
     -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS)
# The multi-process tests at the machine's world size, one process per GPU (ctest runs them with
# two processes sharing a GPU).
# Each on both transports (NVSHMEM when the build has it).
transports=cuda_ipc
grep -q '^TILELINK_WITH_NVSHMEM:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null && transports="cuda_ipc nvshmem"
for transport in $transports; do
  for t in ll_mpi_test ops_mpi_test; do
    echo "== mpirun -np $n $t, transport $transport"
    TILELINK_TRANSPORT=$transport timeout 300 "${mpi[@]}" -x TILELINK_TRANSPORT "$build/bin/$t" --gtest_color=no 2>&1 |
      tee "$logs/$t-$transport.log" | grep -E "PASSED|FAILED|Failure"
  done
  for cmd in primitives ag_gemm gemm_rs gemm_ar allgather_ll flash_decode sp_attention ag_moe moe_rs; do
    echo "== mpirun -np $n tilelink-bench $cmd --mpi, transport $transport"
    TILELINK_TRANSPORT=$transport "${mpi[@]}" -x TILELINK_TRANSPORT "$build/bin/tilelink-bench" "$cmd" --mpi \
      --csv "$logs/$cmd-$transport.csv" 2>&1 | tee "$logs/$cmd-$transport.txt"
  done
done
# Every process its own node: every op over NVSHMEM put-with-signal (the multi-node algorithms).
if [[ "$transports" == *nvshmem* ]]; then
  echo "== mpirun -np $n ops_mpi_test, one node per process"
  TILELINK_TRANSPORT=nvshmem TILELINK_ONE_NODE_PER_PROCESS=1 timeout 300 "${mpi[@]}" -x TILELINK_TRANSPORT \
    -x TILELINK_ONE_NODE_PER_PROCESS "$build/bin/ops_mpi_test" --gtest_color=no 2>&1 |
    tee "$logs/ops_mpi_test-one-node-per-process.log" | grep -E "PASSED|FAILED|Failure"
  for cmd in primitives ag_gemm gemm_rs gemm_ar allgather_ll flash_decode sp_attention ag_moe moe_rs; do
    echo "== mpirun -np $n tilelink-bench $cmd --mpi, one node per process"
    TILELINK_TRANSPORT=nvshmem TILELINK_ONE_NODE_PER_PROCESS=1 "${mpi[@]}" -x TILELINK_TRANSPORT \
      -x TILELINK_ONE_NODE_PER_PROCESS "$build/bin/tilelink-bench" "$cmd" --mpi \
      --csv "$logs/$cmd-one-node-per-process.csv" 2>&1 | tee "$logs/$cmd-one-node-per-process.txt"
  done
fi
PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" torchrun --nproc-per-node "$n" "$root/bench/torch_baselines.py" --csv "$logs/torch.csv" 2>&1 | tee "$logs/torch.txt"
# Decode attention against PyTorch (SDPA per rank + lse + all_gather + combine), and on one GPU
# for the strong-scaling reference.
export TILELINK_LIBRARY="$build/lib/libtilelink_c.so"
for ranks in 1 "$n"; do
  PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" torchrun --standalone --nproc-per-node "$ranks" \
    "$root/bench/decode_attention.py" 2>&1 | tee "$logs/decode_attention_$ranks.txt"
  PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" torchrun --standalone --nproc-per-node "$ranks" \
    "$root/bench/moe.py" 2>&1 | tee "$logs/moe_$ranks.txt"
done
