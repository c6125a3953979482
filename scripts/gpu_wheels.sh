#!/usr/bin/env bash
# The wheels a GPU machine without registry access needs beside its own torch (docs/testing.md):
# the packages gnntrain imports that such a machine lacks, at the versions of this checkout's
# .venv (what CI tests), built for that machine's Python. Run here, where pip reaches the
# registry; the wheels go to .whl/ (ignored by git) and travel with the working tree.
# Usage: scripts/gpu_wheels.sh [python version of the GPU machine, default 3.12]
set -euo pipefail
cd "$(dirname "$0")/.."
PY_VERSION="${1:-3.12}"
DEST=.whl
PYTHON=.venv/bin/python
[ -x "$PYTHON" ] || { echo "gpu_wheels: run make install first (the versions come from .venv)" >&2; exit 2; }
version() { "$PYTHON" -c "import importlib.metadata as m; print(m.version('$1'))"; }
mkdir -p "$DEST"
rm -f "$DEST"/*.whl
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PY_VERSION" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d "$DEST" \
    "hydra-core==$(version hydra-core)" "omegaconf==$(version omegaconf)" "pymetis==$(version pymetis)"
# antlr4-python3-runtime (Hydra's parser) is published as a source archive only: build its pure-Python wheel here
"$PYTHON" -m pip wheel --quiet --no-deps -w "$DEST" "antlr4-python3-runtime==$(version antlr4-python3-runtime)"
ls -1 "$DEST"
