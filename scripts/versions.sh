# Pinned versions of what scripts/setup.sh installs: the one place to change them.
# Sourced by the other scripts; not run on its own.
TILELINK_CUTLASS_VERSION="4.2.0.0"   # PyPI nvidia-cutlass: CUTLASS/CuTe headers of the GEMM engine
TILELINK_NVSHMEM_VERSION="3.4.5"     # PyPI nvidia-nvshmem-cu13: the NVSHMEM transport (the one PyTorch 2.11 ships)
TILELINK_APT_PACKAGES=(cmake ninja-build ccache libopenmpi-dev openmpi-bin libgtest-dev python3-pip)
TILELINK_MIN_CUDA_MAJOR=12            # nvcc must know sm_90a; the project is tested with 13.0
# The Python package's tests (scripts/setup_python.sh): PyTorch as on the GPU machines, pytest.
TILELINK_TORCH_VERSION="2.11.0"
TILELINK_PYTEST_VERSION="9.2.0"
TILELINK_NUMPY_VERSION="2.4.6"
