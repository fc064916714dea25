"""``benchmarks/algorithms.py --quick`` runs and writes its table, JSON and plot."""

import importlib.util
import json
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "algorithms.py"


def load_benchmark():
    spec = importlib.util.spec_from_file_location("algorithms_benchmark", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_quick_run_writes_table_json_and_plot(tmp_path, capsys):
    bench = load_benchmark()
    out = tmp_path / "algorithms"
    argv = ["--quick", "--games", "game:GuessTheNumber-v0-easy", "game:NoSuchGame-v0"]
    results = bench.main([*argv, "--algos", "grpo", "--seeds", "2", "--out", str(out)])
    printed = capsys.readouterr().out
    assert "game:NoSuchGame-v0: not registered, skipped" in printed
    assert [r["env_id"] for r in results] == ["game:GuessTheNumber-v0-easy"]
    rows = results[0]["algos"]
    (row,) = rows
    assert row["algo"] == "grpo"
    assert len(row["success"]) == 2 and len(row["success"][0]) == 2  # [seeds][points]
    assert row["env_steps"] == [16 * 4, 2 * 16 * 4]  # 16 episodes x 4 turns per update
    assert 1.0 <= bench.final(row, "mean_turns") <= 4.0
    assert row["success"][0] != row["success"][1] or row["return"][0] != row["return"][1]
    saved = json.loads(out.with_suffix(".json").read_text())
    assert saved[0]["algos"][0]["train_return"] == row["train_return"]
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "game:GuessTheNumber-v0-easy    grpo" in printed
