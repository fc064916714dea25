#!/usr/bin/env bash
# Set up a local venv (if needed) and run the main job: a batched random rollout of
# every registered game with a throughput table, then one sample episode as text.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
.venv/bin/gemjax bench "$@"
