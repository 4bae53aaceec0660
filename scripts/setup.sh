#!/usr/bin/env bash
# Installs what tilelink needs on a Debian bookworm machine, and nothing that is already there.
# Idempotent: a second run changes nothing. Run as root, or as a user who may sudo.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/versions.sh"

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null; then
    sudo "$@"
  else
    echo "setup: error: installing packages needs root; run as root or install sudo" >&2
    exit 1
  fi
}

# ---- Debian packages ---------------------------------------------------------------------------
missing=()
for pkg in "${TILELINK_APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: Debian packages present (${TILELINK_APT_PACKAGES[*]})"
fi

# ---- pinned PyPI packages into .deps/ ---------------------------------------------------------
# pip_into_deps NAME SPEC MARKER: installs SPEC into .deps/NAME unless .deps/NAME/MARKER exists.
# --target installs into our own folder, so Debian's "externally managed" guard does not apply;
# the variable tells pip so on versions that check anyway.
pip_into_deps() {
  local dir="$root/.deps/$1"
  if [ -f "$dir/$3" ]; then
    echo "setup: $2 present (.deps/$1)"
    return
  fi
  echo "setup: installing $2 into .deps/$1"
  rm -rf "$dir"
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --no-deps --disable-pip-version-check --root-user-action=ignore \
    --target "$dir" "$2"
}
# CUTLASS/CuTe headers (the GEMM engine), NVSHMEM's headers and host library (its transport).
pip_into_deps cutlass "nvidia-cutlass==$TILELINK_CUTLASS_VERSION" cutlass_library/source/include/cutlass/cutlass.h
pip_into_deps nvshmem "nvidia-nvshmem-cu13==$TILELINK_NVSHMEM_VERSION" nvidia/nvshmem/lib/libnvshmem_host.so.3

# ---- CUDA toolkit ------------------------------------------------------------------------------
nvcc_path="$(command -v nvcc || true)"
if [ -z "$nvcc_path" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc_path=/usr/local/cuda/bin/nvcc; fi
if [ -z "$nvcc_path" ]; then
  echo "setup: error: nvcc (the CUDA toolkit, $TILELINK_MIN_CUDA_MAJOR.x or newer) is not installed;" \
       "install it from NVIDIA (it is not a Debian package here) and put it on PATH" >&2
  exit 1
fi
cuda_major="$("$nvcc_path" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')"
if [ -z "$cuda_major" ] || [ "$cuda_major" -lt "$TILELINK_MIN_CUDA_MAJOR" ]; then
  echo "setup: error: $nvcc_path is CUDA ${cuda_major:-?}; tilelink needs $TILELINK_MIN_CUDA_MAJOR.x or newer (sm_90a)" >&2
  exit 1
fi
echo "setup: nvcc $cuda_major.x at $nvcc_path"
