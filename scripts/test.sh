#!/usr/bin/env bash
# Installs, builds, and runs the test suite: the CPU tests everywhere (C++ and the Python
# package's), the GPU tests (label gpu) too when an NVIDIA GPU is present. ctest's summary is the last thing printed; the exit code is
# ctest's.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TILELINK_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
"$root/scripts/setup_python.sh"
"$root/scripts/build.sh"

# Multicast/NVLS stays off on the machines tilelink is tested on (it can take a shared host's GPUs out of service).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

labels=()
if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "test: $(nvidia-smi -L | grep -c '^GPU ') GPU(s) found: running every test (CPU and GPU)"
else
  echo "test: no NVIDIA GPU here: running the CPU tests only (ctest -LE gpu)"
  labels=(-LE gpu)
fi

set +e
ctest --test-dir "$build" --output-on-failure --no-tests=error "${labels[@]}"
exit $?
