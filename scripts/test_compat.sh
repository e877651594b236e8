#!/usr/bin/env bash
# The compatibility stage of `make test` (`make test-compat`): the corpus, shape-only runs,
# the module tree and failing calls on the oldest and newest torch, each traced program run
# through `shapelens run --python <that venv's python>` as a user with their own venv would
# (forked from a fork server in that interpreter, as the rest of the suite).
#   torch 2.4.1 on Python 3.10 and 3.11, torch 2.14.1 on Python 3.12; the 3.12 set also has
#   the libraries people train with (LIBRARIES) and runs tests/test_library_stack.py.
# The tests themselves run in the main venv ($PY). Each set has its own venv, made once
# under .venv-compat/ (git-ignored) and reused while its pins stay the same (its .installed
# holds them: a set whose pins changed is made anew); `test_compat.sh --install` only makes them
# (`make test` does it beside its other installs). The runs are time-boxed together to
# COMPAT_BUDGET_S seconds (default 480: 8 minutes on 2 cores); making a venv is not counted.
set -euo pipefail
unset PYTHONDONTWRITEBYTECODE  # modules compiled once, when first imported (the Makefile says why)
if [ -n "${SKIP_OTHER_PYTHONS:-}" ]; then
  echo "== SKIP_OTHER_PYTHONS set: the compatibility stage not run"; exit 0
fi
PY=${PY:-.venv/bin/python}
UV=${UV:-.tools/uv/bin/uv}  # the Makefile's uv (pip when it is missing)
PYENV_ROOT=${PYENV_ROOT:-$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")}
BUDGET=${COMPAT_BUDGET_S:-480}
VENVS=${COMPAT_VENVS:-.venv-compat}  # another checkout's, to share its venvs
ALL="tests/test_corpus.py tests/test_shape_only.py tests/test_shape_only_limits.py tests/test_shape_only_values.py tests/test_module_tree.py tests/test_failed_calls.py"
LIBRARIES="torchvision==0.29.1 transformers==5.25.0 lightning==2.6.6 timm==1.0.31 einops==0.8.2 accelerate==1.16.0"
LIBRARY_TESTS=tests/test_library_stack.py  # with SHAPELENS_LIBRARY_PYTHON: ~30 s of one worker
# name, interpreter version, pins, test files (211 s in all on this 2-core machine, busy; 745 s
# before the runs were forked from a fork server). torch 2.4 on 3.11 leaves out the corpus
# (on torch 2.4 under 3.10, and on 3.11 with the main suite's torch).
# The clean corpus run shape-only to its end (~80 s of CPU) runs on the newest torch only;
# torch 2.4 on 3.11 leaves out the stand-ins' own tests and the 1.2B GPT too (3.10 runs them
# on torch 2.4).
CORPUS_SHAPES="clean_corpus_raises_no_alarm_shapes_only"
# Collectives, hangs and sharded tensors under torchrun, from the command line (~40 s of one
# worker): only here, on the newest torch and sys.monitoring; the main suite's 3.11 runs the
# editor's ones (language_server: this stage never runs those), its 3.12 none.
DISTRIBUTED=tests/test_distributed_truth.py
SETS=(
  "py310-torch24|3.10.13|torch==2.4.1 numpy<2|$ALL|$CORPUS_SHAPES"
  "py311-torch24|3.11.7|torch==2.4.1 numpy<2|${ALL/tests\/test_corpus.py /}|$CORPUS_SHAPES or test_shape_only_values or billion_parameter_gpt"
  "py312-torch214|3.12.1|torch==2.14.1 numpy $LIBRARIES|$LIBRARY_TESTS $ALL $DISTRIBUTED|"
)
# `make test-torch-versions` (`--between`): the releases between, once each, on the newest
# interpreter of their time here (not in `make test`: 20 GB of venvs and ~4 minutes more).
if [[ " $* " == *" --between "* ]]; then
  SETS=(
    "py311-torch26|3.11.7|torch==2.6.0 numpy|$ALL"
    "py311-torch28|3.11.7|torch==2.8.0 numpy|$ALL"
    "py312-torch210|3.12.1|torch==2.10.0 numpy|$ALL"
    "py313-torch212|3.13.0|torch==2.12.0 numpy|$ALL"
  )
fi

venv_for() {  # name version pins: the venv's python, made when missing
  local venv=$VENVS/$1 interpreter=$PYENV_ROOT/versions/$2/bin/python
  if [ "$(cat "$venv/.installed" 2>/dev/null)" != "$3" ]; then
    if [ ! -x "$interpreter" ]; then
      echo "make test-compat needs $interpreter (pyenv install $2)" >&2; exit 1
    fi
    rm -rf "$venv"
    "$interpreter" -m venv "$venv"
    # shellcheck disable=SC2086  # the pins are words
    if [ -x "$UV" ]; then  # uv: ~4x faster than pip here (the Makefile says why)
      "$UV" pip install -q --python "$venv/bin/python" $3 >&2
    else
      "$venv/bin/python" -m pip install -q $3 >&2
    fi
    "$venv/bin/python" "$(dirname "$0")/warm_imports.py" >&2  # the Makefile says why
    echo "$3" > "$venv/.installed"
  fi
  echo "$venv/bin/python"
}

if [ -n "${COMPAT_ONLY:-}" ]; then  # one set by name: COMPAT_ONLY=py311-torch26
  for set in "${SETS[@]}"; do [[ $set == "$COMPAT_ONLY|"* ]] && SETS=("$set") && break; done
fi
installs=()  # side by side: mostly downloads and unpacking
for set in "${SETS[@]}"; do
  IFS="|" read -r name version pins _ <<<"$set"
  venv_for "$name" "$version" "$pins" >/dev/null &
  installs+=($!)
done
for install in "${installs[@]}"; do wait "$install"; done
if [[ " $* " == *" --install "* ]]; then exit 0; fi
pythons=()
for set in "${SETS[@]}"; do
  IFS="|" read -r name version pins _ <<<"$set"
  pythons+=("$(venv_for "$name" "$version" "$pins")")
done

started=$SECONDS
for index in "${!SETS[@]}"; do
  IFS="|" read -r name _ _ files skip <<<"${SETS[$index]}"
  left=$((BUDGET - (SECONDS - started)))
  python=$(cd "$(dirname "${pythons[$index]}")" && pwd)/python  # absolute
  echo "== compatibility: $name ($("$python" -c 'import sys, torch; print("Python %d.%d.%d" % sys.version_info[:3], "torch", torch.__version__)')), ${left}s left"
  if [ "$left" -le 0 ]; then echo "the compatibility stage ran past ${BUDGET}s" >&2; exit 1; fi
  library=  # the interpreter of the library stack's tests: this set's, where it runs them
  if [[ " $files " == *" $LIBRARY_TESTS "* ]]; then library=$python; fi
  # shellcheck disable=SC2086  # the files are words
  # two workers: a file's traced runs wait on their children, one worker kept a core idle
  SHAPELENS_TEST_PYTHON=$python SHAPELENS_LIBRARY_PYTHON=$library timeout "$left" "$PY" -m pytest -q -p no:cacheprovider \
    -n 2 --dist loadfile $files -k "not language_server${skip:+ and not ($skip)}" \
    || { status=$?; [ $status -eq 124 ] && echo "the compatibility stage ran past ${BUDGET}s" >&2; exit $status; }
done
echo "== compatibility stage: $((SECONDS - started))s of ${BUDGET}s"
