#!/usr/bin/env bash
# run_mpi_test.sh MPIEXEC NP BINARY [ARGS...]
#
# Runs BINARY as NP processes under mpirun on this node, with a private MPS daemon around it so
# processes sharing a GPU run their kernels concurrently (without MPS a cross-process signal
# round trip waits for a time slice, ~4.5 ms; with it ~1.5 us). MPS is stopped afterwards. If MPS
# cannot be started the run goes ahead without it (slower, still correct) and says so.
# TILELINK_NO_MPS=1 skips MPS; TILELINK_MPI_TIMEOUT_S bounds the whole run (default 240 s).
# TILELINK_TRANSPORT (cuda_ipc, nvshmem) and the other TILELINK_* variables reach every process.
set -u
if [ $# -lt 3 ]; then
  echo "usage: $0 MPIEXEC NP BINARY [ARGS...]" >&2
  exit 2
fi
mpiexec=$1
np=$2
shift 2

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tilelink-mps.XXXXXX")
export CUDA_MPS_PIPE_DIRECTORY=$tmp/pipe CUDA_MPS_LOG_DIRECTORY=$tmp/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"

mps=0
if [ "${TILELINK_NO_MPS:-0}" != 1 ] && command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
  if nvidia-cuda-mps-control -d; then
    mps=1
    echo "run_mpi_test: MPS daemon started (pipe $CUDA_MPS_PIPE_DIRECTORY)"
  else
    echo "run_mpi_test: could not start MPS; running without it (cross-process waits are slow)" >&2
  fi
else
  echo "run_mpi_test: running without MPS" >&2
fi

cleanup() {
  if [ "$mps" = 1 ]; then
    echo quit | nvidia-cuda-mps-control
    sleep 1  # quit returns before the server has exited
    if [ -s "$CUDA_MPS_LOG_DIRECTORY/server.log" ] && grep -qi error "$CUDA_MPS_LOG_DIRECTORY/server.log"; then
      echo "run_mpi_test: MPS server log reports errors:" >&2
      tail -n 20 "$CUDA_MPS_LOG_DIRECTORY/server.log" >&2
    fi
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# The settings every process needs; TILELINK_* ones (the transport, timeouts, ...) when set.
forward=(-x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS
         -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY)
for var in $(compgen -e | grep '^TILELINK_' || true); do forward+=(-x "$var"); done
echo "run_mpi_test: transport ${TILELINK_TRANSPORT:-cuda_ipc (default)}"

timeout -k 10 "${TILELINK_MPI_TIMEOUT_S:-240}" \
  "$mpiexec" -np "$np" --allow-run-as-root --oversubscribe --bind-to none \
  --mca btl_vader_single_copy_mechanism none "${forward[@]}" \
  "$@"
rc=$?
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
  echo "run_mpi_test: timed out after ${TILELINK_MPI_TIMEOUT_S:-240} s" >&2
fi
exit $rc
