"""The notebooks run top to bottom (at a tiny budget)."""

import json
from pathlib import Path
from typing import Any

import matplotlib
import pytest

NOTEBOOKS = Path(__file__).parents[2] / "notebooks"


def execute(name: str) -> dict[str, Any]:
    """Run every code cell of ``notebooks/<name>`` in one namespace and return it."""
    matplotlib.use("Agg")
    path = NOTEBOOKS / name
    cells = json.loads(path.read_text())["cells"]
    code = [("".join(c["source"]), i) for i, c in enumerate(cells) if c["cell_type"] == "code"]
    assert len(code) >= 4
    namespace: dict[str, Any] = {}
    for source, index in code:
        exec(compile(source, f"{path.name}[cell {index}]", "exec"), namespace)
    return namespace


@pytest.mark.slow
def test_notebook_executes_and_shows_an_episode(monkeypatch, capsys):
    monkeypatch.setenv("GEMJAX_NOTEBOOK_UPDATES", "4")
    namespace = execute("train_guess_the_number.ipynb")
    assert namespace["config"].num_updates == 4
    records = namespace["result"].records
    assert records and records[-1]["update"] == 4
    assert (namespace["out"] / "metrics.jsonl").exists()
    out = capsys.readouterr().out
    assert "greedy success" in out
    assert "You are playing Guess The Number." in out
    assert "\\boxed{" in out and "At turn 1, you " in out


@pytest.mark.slow
def test_token_agent_notebook_trains_plots_and_shows_an_episode(monkeypatch, capsys):
    monkeypatch.setenv("GEMJAX_NOTEBOOK_BUDGET", "tiny")
    namespace = execute("token_agent.ipynb")
    config = namespace["config"]
    records = namespace["result"].records
    assert [r["phase"] for r in records] == ["warmup", "rl"]
    assert records[-1]["update"] == config.warmup_updates + config.num_updates
    assert all(0.0 <= r["format_error_rate"] <= 1.0 for r in records)
    assert (namespace["out"] / "metrics.jsonl").exists()
    assert len(namespace["fig"].axes) == 3
    out = capsys.readouterr().out
    assert "format errors" in out
    assert "You are playing Guess The Number." in out
    assert "> " in out and "[reward " in out
