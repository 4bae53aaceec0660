#!/usr/bin/env bash
# Installs a built tilelink into a scratch prefix and builds examples/ against it with
# find_package(tilelink), as a separate project would:
#
#   scripts/check_install.sh [BUILD_DIR] [SCRATCH_DIR]
#
# Needs no GPU (it builds; it runs nothing). The CPU tests run it (cpu_install_consumer).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:-${TILELINK_BUILD_DIR:-$root/build}}" && pwd)"
scratch="${2:-$build/install-check}"
rm -rf "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" > "$scratch.install.log" 2>&1 ||
  { cat "$scratch.install.log"; exit 1; }
echo "installed into $scratch/prefix: $(find "$scratch/prefix" -type f | wc -l) files"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$root/examples" -B "$scratch/examples" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$scratch/prefix"
cmake --build "$scratch/examples" -j"$(nproc)"
echo "built against the installed package: $(find "$scratch/examples" -maxdepth 1 -type f -executable -printf "%f ")"
