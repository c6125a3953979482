#!/usr/bin/env bash
# On a GPU machine with its own CUDA torch and no registry access: install the carried wheels
# (scripts/gpu_wheels.sh) and this checkout, nothing from an index, torch left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${GPU_PYTHON:-python3}"
"$PYTHON" -m pip install --quiet --no-index --no-deps --no-build-isolation .whl/*.whl
"$PYTHON" -m pip install --quiet --no-index --no-deps --no-build-isolation -e .
"$PYTHON" -c "import torch, gnntrain; print('gnntrain on', torch.__version__, 'CUDA', torch.version.cuda, \
'GPUs:', torch.cuda.device_count())"
