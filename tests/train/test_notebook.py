"""The training notebook runs top to bottom (at a tiny budget)."""

import json
from pathlib import Path

import matplotlib

NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "train_guess_the_number.ipynb"


def test_notebook_executes_and_shows_an_episode(monkeypatch, capsys):
    matplotlib.use("Agg")
    monkeypatch.setenv("GEMJAX_NOTEBOOK_UPDATES", "4")
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    code = [("".join(c["source"]), i) for i, c in enumerate(cells) if c["cell_type"] == "code"]
    assert len(code) >= 4
    namespace: dict = {}
    for source, index in code:
        exec(compile(source, f"{NOTEBOOK.name}[cell {index}]", "exec"), namespace)
    assert namespace["config"].num_updates == 4
    records = namespace["result"].records
    assert records and records[-1]["update"] == 4
    assert (namespace["out"] / "metrics.jsonl").exists()
    out = capsys.readouterr().out
    assert "greedy success" in out
    assert "You are playing Guess The Number." in out
    assert "\\boxed{" in out and "At turn 1, you " in out
