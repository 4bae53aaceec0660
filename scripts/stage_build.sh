#!/usr/bin/env bash
# Copies what running the GPU tests and benchmarks needs out of a build tree — bin/ (but the CPU
# tests, cpu_*, which run where they were built), lib/ and the CTest files, at their relative
# paths — into DEST (default .gpu/<build name>), so a built tree can be
# shipped to a GPU machine without its object files. There, put it back at the build's original
# absolute path (CTest files name absolute paths) and run `ctest --test-dir <build> -L gpu`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
dest="${2:-$root/.gpu/$(basename "$build")}"
rm -rf "$dest"
mkdir -p "$dest"
mkdir -p "$dest/bin"
find "$build/bin" -maxdepth 1 -type f ! -name 'cpu_*' -exec cp -a {} "$dest/bin/" \;
[ -d "$build/lib" ] && cp -a "$build/lib" "$dest/"  # libtilelink_c.so, for the Python package
# Host symbols and debug sections are not needed to run there (the device code is untouched).
find "$dest/bin" "$dest/lib" -type f -perm -u+x -exec strip --strip-unneeded {} + 2>/dev/null || true
(cd "$build" && find . -name CTestTestfile.cmake -print0 | xargs -0 -I{} cp --parents {} "$dest/")
# The same as one gzip archive (the kernels' fat binaries compress ~4x), for transfers with a size
# limit: unpack with `tar -xzf <dest>.tgz -C <parent of dest>`.
tar -czf "$dest.tgz" -C "$(dirname "$dest")" "$(basename "$dest")"
echo "staged $build -> $dest ($(du -sh "$dest" | cut -f1); $dest.tgz $(du -sh "$dest.tgz" | cut -f1))"
