#!/usr/bin/env bash
# The compatibility stage of `make test` (`make test-compat`): the corpus, shape-only runs,
# the module tree and failing calls on the oldest torch, each traced program run through
# `shapelens run --python <that venv's python>` as a user with their own venv would
# (forked from a fork server in that interpreter, as the rest of the suite).
#   torch 2.4.1 on Python 3.10 and 3.11. The newest (2.14.1) is the Makefile's 3.12 venv's,
#   which runs the whole suite, these files, the library stack and torchrun's ranks included.
# The tests themselves run in the main venv ($PY). Each set has its own venv, made once
# under .venv-compat/ (git-ignored) by scripts/make_venv.sh and reused while its pins stay
# the same; `test_compat.sh --install` only makes them (`make test` does it beside its other
# installs). The runs are time-boxed together to COMPAT_BUDGET_S seconds (default 300: 5
# minutes on 2 cores); making a venv is not counted.
set -euo pipefail
unset PYTHONDONTWRITEBYTECODE  # modules compiled once, when first imported (the Makefile says why)
if [ -n "${SKIP_OTHER_PYTHONS:-}" ]; then
  echo "== SKIP_OTHER_PYTHONS set: the compatibility stage not run"; exit 0
fi
PY=${PY:-.venv/bin/python}
UV=${UV:-.tools/uv/bin/uv}  # the Makefile's uv (pip when it is missing)
PYENV_ROOT=${PYENV_ROOT:-$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")}
BUDGET=${COMPAT_BUDGET_S:-300}
VENVS=${COMPAT_VENVS:-.venv-compat}  # another checkout's, to share its venvs
ALL="tests/test_corpus.py tests/test_shape_only.py tests/test_shape_only_limits.py tests/test_shape_only_values.py tests/test_module_tree.py tests/test_failed_calls.py tests/test_collate_failures.py tests/test_in_place_backward.py"
# name, interpreter version, pins, test files, what they leave out (84 s in all on this 2-core
# machine, busy). torch 2.4 on 3.11 leaves out the corpus (on torch 2.4 under 3.10, and on
# 3.11 with the main suite's torch). The clean corpus run shape-only to its end (~80 s of
# CPU) runs on the newest torch only (the 3.12 suite); torch 2.4 on 3.11 leaves out the
# stand-ins' own tests and the 1.2B GPT too (3.10 runs them on torch 2.4).
CORPUS_SHAPES="clean_corpus_raises_no_alarm_shapes_only"
SETS=(
  "py310-torch24|3.10.13|torch==2.4.1 numpy<2|$ALL|$CORPUS_SHAPES"
  "py311-torch24|3.11.7|torch==2.4.1 numpy<2|${ALL/tests\/test_corpus.py /}|$CORPUS_SHAPES or test_shape_only_values or billion_parameter_gpt"
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
  if [ ! -x "$interpreter" ]; then
    echo "make test-compat needs $interpreter (pyenv install $2)" >&2; exit 1
  fi
  # shellcheck disable=SC2086  # the pins are words
  UV=$UV "$(dirname "$0")/make_venv.sh" "$venv" "$interpreter" $3 >&2
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
  # shellcheck disable=SC2086  # the files are words
  # two workers: a file's traced runs wait on their children, one worker kept a core idle
  SHAPELENS_TEST_PYTHON=$python timeout "$left" "$PY" -m pytest -q -p no:cacheprovider \
    -n 2 --dist loadfile $files -k "not language_server${skip:+ and not ($skip)}" \
    || { status=$?; [ $status -eq 124 ] && echo "the compatibility stage ran past ${BUDGET}s" >&2; exit $status; }
done
echo "== compatibility stage: $((SECONDS - started))s of ${BUDGET}s"
