# Pinned versions of what scripts/setup.sh installs: the one place to change them.
# Sourced by the other scripts; not run on its own.
TILELINK_CUTLASS_VERSION="4.2.0.0"   # PyPI nvidia-cutlass: CUTLASS/CuTe headers of the GEMM engine
TILELINK_APT_PACKAGES=(cmake ninja-build ccache libopenmpi-dev openmpi-bin libgtest-dev python3-pip)
TILELINK_MIN_CUDA_MAJOR=12            # nvcc must know sm_90a; the project is tested with 13.0
