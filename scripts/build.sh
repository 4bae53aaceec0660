#!/usr/bin/env bash
# Configures (Ninja, Release) and builds everything: library, tests, tilelink-bench.
# The build folder is build/ (TILELINK_BUILD_DIR overrides it).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TILELINK_BUILD_DIR:-$root/build}"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j"$(nproc)"
