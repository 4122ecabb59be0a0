#!/usr/bin/env bash
# Run on the GPU machine from the repository root, after scripts/gpu/build.sh staged the
# conflux wheel and pytest's wheels in .gpu/wheels: install them beside the machine's torch
# (no network there) and run the Python suite with its CUDA variants required.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export CONFLUX_CACHE_DIR=${CONFLUX_CACHE_DIR:-/tmp/conflux-cache}
export CONFLUX_REQUIRE_GPU=1
lib=/tmp/conflux-pylib
rm -rf "$lib"
python3 -m pip install -q --no-deps --no-index --target "$lib" .gpu/wheels/*.whl 2>&1 | grep -v -i "warning" || true
export PYTHONPATH=$lib
python3 -m pytest -q -p no:cacheprovider python/tests "$@"
