#!/usr/bin/env bash
# Set up a local venv (if needed) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev,llm]"
# tunix itself, without its dependencies: the llm extra holds them, less tunix's
# safetensors<0.8 pin, which would downgrade transformers (see pyproject.toml).
.venv/bin/python -m pip install -q --no-deps "google-tunix==0.1.7"
.venv/bin/ruff check .
# Types of the package (configuration: [tool.mypy] in pyproject.toml).
.venv/bin/mypy
set +e
# Two worker processes (pytest-xdist): most of the suite's time is XLA compiling,
# one core per executable. GEMJAX_TEST_WORKERS=0 runs in this process. Tests marked
# xdist_group(name) run in one worker, to share what they compile.
.venv/bin/python -m pytest -q -n "${GEMJAX_TEST_WORKERS:-2}" --dist loadgroup --durations=40 "$@"
status=$?
set -e
# pytest exits 5 when it collected no tests: that is a failure here, not a pass.
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests" >&2
fi
exit "$status"
