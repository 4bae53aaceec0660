#!/usr/bin/env bash
# Prepares .deps/venv, the interpreter the Python package's tests run with (ctest's python_cpu):
# pinned PyTorch, pytest and numpy from PyPI. Idempotent. The package itself is not installed
# there: the tests import it from python/ and load the build tree's libtilelink_c.so.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/versions.sh"
venv="$root/.deps/venv"
want="torch==$TILELINK_TORCH_VERSION pytest==$TILELINK_PYTEST_VERSION numpy==$TILELINK_NUMPY_VERSION"

if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.pins" 2>/dev/null)" = "$want" ]; then
  echo "setup: Python test environment present (.deps/venv: $want)"
  exit 0
fi
echo "setup: installing $want into .deps/venv"
rm -rf "$venv"
python3 -m venv "$venv"
# shellcheck disable=SC2086
"$venv/bin/python" -m pip install -q --disable-pip-version-check $want
echo "$want" > "$venv/.pins"
