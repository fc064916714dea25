#!/usr/bin/env bash
# Set up a local venv (if needed) and run the main job: a short on-device training run
# (ReBN, gamma 0.9, GuessTheNumber 1..50 in 50 turns: about two minutes on 2 CPU cores),
# then a batched random rollout of every registered game with a throughput table and
# one sample episode printed as text. Training shows a progress bar on a terminal.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
rm -rf runs/demo
.venv/bin/gemjax train --out runs/demo
.venv/bin/gemjax bench "$@"
