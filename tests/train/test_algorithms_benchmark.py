"""``benchmarks/algorithms.py``: the protocol's quick run, its statistics, and the docs
section generated from the committed JSON."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from gemjax.benchmark import read_section, section_markers, write_section

ROOT = Path(__file__).parents[2]
BENCHMARK = ROOT / "benchmarks" / "algorithms.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("algorithms_benchmark", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_quick_run_writes_table_json_and_plot(bench, tmp_path, capsys):
    out = tmp_path / "algorithms"
    games = ["game:GuessTheNumber-v0-easy", "game:NoSuchGame-v0"]
    argv = ["--quick", "--games", *games, "--variants", "rebn", "gem-grpo"]
    results = bench.main([*argv, "--seeds", "0", "1", "--selection-seeds", "7", "--out", str(out)])
    printed = capsys.readouterr().out
    assert "game:NoSuchGame-v0: not registered, skipped" in printed
    (game,) = results["games"]
    assert game["env_id"] == "game:GuessTheNumber-v0-easy"
    assert game["reference_return"] == 1.0 and game["reference_turns"] is None
    assert [row["variant"] for row in game["variants"]] == ["rebn", "gem-grpo"]
    row = game["variants"][1]
    assert row["settings"] == {"algo": "grpo", "grpo_score": "gem", **bench.GEM_LOOP}
    assert list(row["sweep_final_return"]) == [str(bench.BASE.learning_rate)]
    assert np.asarray(row["success"]).shape == (2, 2)  # [seeds][points]
    assert row["env_steps"] == [16 * 4, 2 * 16 * 4]  # 16 episodes x 4 turns per update
    cpu = np.asarray(row["cpu_s"])
    assert np.all(cpu > 0) and np.allclose(cpu[:, 1], 2 * cpu[:, 0])
    assert row["final"]["return"]["low"] <= row["final"]["return"]["mean"]
    assert row["return"][0] != row["return"][1] or row["success"][0] != row["success"][1]
    assert set(results["summary"]["iqm_normalized_return"]) == {"rebn", "gem-grpo"}
    saved = json.loads(out.with_suffix(".json").read_text())
    assert saved["games"][0]["variants"][0]["return"] == game["variants"][0]["return"]
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "game:GuessTheNumber-v0-easy    gem-grpo" in printed


@pytest.mark.slow
def test_quick_designs_run_reports_minesweepers_cleared_boards(bench, tmp_path):
    out = tmp_path / "designs"
    argv = ["--quick", "--designs", "--games", "game:Minesweeper-v0-easy", "--seeds", "0"]
    results = bench.main([*argv, "--selection-seeds", "7", "--out", str(out)])
    (game,) = results["games"]
    assert [row["variant"] for row in game["variants"]] == ["ppo", *bench.DESIGNS]
    for row in game["variants"]:
        assert row["settings"] == bench.VARIANTS[row["variant"]]
        assert np.asarray(row["cleared"]).shape == (1, 2)  # [seeds][points]
        assert 0.0 <= row["final"]["cleared"]["mean"] <= 1.0
    table = bench.render_docs(results, "designs.png")
    assert "| cleared [95%] |" in table and "results/designs.png" in table
    assert "| ppo+joint+mask | 0.002 |" in table


@pytest.mark.parametrize("stem", ["algorithms", "policy_design"])
def test_the_committed_summary_is_computed_from_the_committed_runs(bench, stem):
    results = json.loads((bench.RESULTS / f"{stem}.json").read_text())
    assert results["summary"] == bench.summarize(results["games"])


def test_intervals_follow_student_t_and_bounds(bench):
    estimate = bench.interval([1.0, 2.0, 3.0, 4.0, 5.0])
    half = 2.776 * np.std([1, 2, 3, 4, 5], ddof=1) / np.sqrt(5)
    assert estimate == pytest.approx({"mean": 3.0, "low": 3.0 - half, "high": 3.0 + half})
    assert bench.interval([0.0, 0.0, 0.1], (0.0, 1.0))["low"] == 0.0
    assert bench.interval([0.5]) == {"mean": 0.5, "low": 0.5, "high": 0.5}
    assert bench.separated({"low": 0.6, "high": 0.9}, {"low": 0.1, "high": 0.5})
    assert not bench.separated({"low": 0.4, "high": 0.9}, {"low": 0.1, "high": 0.5})


def test_iqm_drops_the_outer_quarters(bench):
    assert bench.iqm(np.array([100.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, -100.0])) == 3.5
    assert bench.iqm(np.array([0.0, 1.0, 2.0, 6.0, 100.0])) == 3.0  # n = 5: one cut each end
    scores = np.array([[0.1, 0.2, 0.3], [0.5, 0.6, 0.7]])
    estimate = bench.iqm_interval(scores)
    assert estimate["low"] <= estimate["mean"] <= estimate["high"]
    assert estimate == bench.iqm_interval(scores)  # a fixed bootstrap seed


def test_a_section_is_replaced_between_its_markers_only(tmp_path):
    path = tmp_path / "doc.md"
    path.write_text("# Title\n\nhand text\n")
    with pytest.raises(ValueError, match=r"has no section of bench\.py"):
        write_section(path, "bench.py", "| a |")
    begin, end = section_markers("bench.py")
    path.write_text(f"# Title\n\n{begin}\nold\n{end}\n\nhand text\n")
    write_section(path, "bench.py", "| new |\n")
    assert path.read_text() == f"# Title\n\n{begin}\n\n| new |\n\n{end}\n\nhand text\n"
    assert read_section(path, "bench.py").strip() == "| new |"
