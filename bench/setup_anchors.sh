#!/usr/bin/env bash
# Creates the git-ignored venv holding the comparison tracers (torchsnooper, snoop).
# Kept apart from .venv so their pins (setuptools<82 for torchsnooper's pkg_resources)
# never leak into the project's own environment. Idempotent: a working venv is reused.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SHAPELENS_ANCHORS_VENV:-$ROOT/.venv-anchors}"
PY="${PYTHON:-python3}"

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import torch, torchsnooper, snoop" 2>/dev/null; then
    echo "anchors venv ready: $VENV"
    exit 0
fi

"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
# torch MUST stay pinned: the local 2.13.0 CPU wheel installs in seconds, unpinned is GBs.
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    torch==2.13.0 "setuptools<82" torchsnooper==0.8 snoop==0.6.1 pysnooper==1.2.3
"$VENV/bin/python" -c "import torch, torchsnooper, snoop; print('anchors venv ready:', torch.__version__)"
