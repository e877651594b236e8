#!/usr/bin/env bash
# Makes one of make test's torch venvs, or keeps it: scripts/make_venv.sh VENV PYTHON PIN...
# (the Makefile's 3.12 and 3.13 venvs, scripts/test_compat.sh's). A venv is kept while its
# .installed holds the same pins (and, where they install this checkout with -e, is newer
# than pyproject.toml); otherwise it is made anew: `PYTHON -m venv`, uv installs the pins,
# and scripts/warm_imports.py writes the bytecode of what the suites import (the Makefile
# says why).
#
# uv runs one install at a time ($UV_LOCK, the Makefile's lock for its own uv too). The
# CUDA builds of torch share their nvidia-* wheels (~3 GB unpacked per torch release): uv
# processes side by side each downloaded and unpacked them into their own cache entry (of
# 25 GB of cache, 7.4 GB were such copies). One at a time, the second venv of a torch
# release takes them from the cache (10 CPU-s instead of 25). Venv creation and bytecode
# still overlap. Only new pins make the venv anew; a newer pyproject.toml reinstalls into it.
set -euo pipefail
unset PYTHONDONTWRITEBYTECODE  # modules compiled once, when first imported
if [ $# -lt 3 ]; then
  echo "usage: scripts/make_venv.sh VENV PYTHON PIN..." >&2; exit 2
fi
venv=$1 interpreter=$2
shift 2
pins="$*"
UV=${UV:-.tools/uv/bin/uv}  # the Makefile's uv (pip when it is missing)
UV_LOCK=${UV_LOCK:-.tools/uv/install.lock}

current=$(cat "$venv/.installed" 2>/dev/null || true)
if [ "$current" = "$pins" ]; then
  case " $pins " in
    *" -e "*) [ "$venv/.installed" -nt pyproject.toml ] && exit 0 ;;
    *) exit 0 ;;
  esac
else
  if [ ! -x "$interpreter" ]; then
    echo "$interpreter is not an interpreter (pyenv install its version)" >&2; exit 1
  fi
  rm -rf "$venv"
  "$interpreter" -m venv "$venv"
fi
if [ -x "$UV" ]; then  # ~4x faster than pip here
  flock "$UV_LOCK" "$UV" pip install -q --python "$venv/bin/python" "$@"
else
  "$venv/bin/python" -m pip install -q "$@"
fi
"$venv/bin/python" "$(dirname "$0")/warm_imports.py"
echo "$pins" > "$venv/.installed"
