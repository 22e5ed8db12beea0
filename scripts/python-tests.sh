#!/usr/bin/env bash
# Builds the Python package from python/ in a fresh virtual environment exactly as a
# user would (`pip install ./python`), type-checks the documented examples with
# `mypy --strict`, runs them, then runs the pytest suite. A pytest run that collects no
# test (exit code 5) is a failure.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" -m venv "$work/venv"
pip="$work/venv/bin/pip"
"$pip" install --quiet --upgrade pip
# pytest, hypothesis, mypy and pyarrow (the optional Arrow support is tested too).
"$pip" install --quiet "$repo/python[test,arrow]"
cd "$repo/python"
"$work/venv/bin/mypy" --strict examples
# Run from outside python/ so that `import strata` finds the installed package.
cd "$work"
"$work/venv/bin/python" "$repo/python/examples/quickstart.py"
set +e
"$work/venv/bin/pytest" -q -p no:cacheprovider "$repo/python/tests"
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "python: pytest collected no tests" >&2
    exit 1
fi
exit "$status"
