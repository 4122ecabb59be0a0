#!/usr/bin/env bash
# The Python package's suite: make a virtual environment (.venv, or $CONFLUX_VENV) on first
# use, install what the suite needs (torch from PyPI, numpy, pytest), build and install conflux
# into it with pip (maturin), run pytest. A second run reuses the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${CONFLUX_VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# torch is pinned so that a run is reproducible; the PyPI wheel is the only torch PyPI has for
# x86-64 Linux (it brings CUDA's libraries, ~5 GB installed, and runs on machines without a GPU).
# No pip cache: it would keep a second copy of those ~3 GB of wheels on a disk CI shares with
# the Rust test binaries.
pip=("$venv/bin/pip" install -q --disable-pip-version-check --no-cache-dir)
"${pip[@]}" "torch==2.15.0" "numpy>=1.24" pytest
"${pip[@]}" .
"$venv/bin/python" -m pytest -q python/tests "$@"
