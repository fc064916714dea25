"""``benchmarks/token_loop.py --quick`` measures both loops and writes its JSON."""

import importlib.util
import json
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "token_loop.py"


@pytest.mark.slow
def test_quick_run_prints_the_table_and_writes_json(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("token_loop_benchmark", BENCHMARK)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "token_loop.json"
    (row,) = bench.main(["--quick", "--out", str(out)])
    assert (row["size"], row["batch"]) == ("tiny", 16)
    assert row["device_turns_per_s"] > 0 and row["host_turns_per_s"] > 0
    assert row["speedup"] == pytest.approx(row["device_turns_per_s"] / row["host_turns_per_s"])
    assert 0.0 < row["env_and_bridge_share"] < 1.0
    assert 0 < row["auto_reset_turns"] <= 16 * bench.LOOP.horizon
    assert row["auto_reset_speedup_cpu"] == pytest.approx(
        row["auto_reset_turns_per_cpu_s"] / row["host_turns_per_cpu_s"]
    )
    assert 1.0 <= row["mean_turns"] <= bench.LOOP.horizon
    assert 0 < row["host_auto_reset_turns"] <= 16 * bench.LOOP.horizon
    assert row["host_auto_reset_turns"] >= row["host_turns"]
    assert row["auto_reset_same_loop_speedup"] == pytest.approx(
        row["auto_reset_turns_per_s"] / row["host_auto_reset_turns_per_s"]
    )
    saved = json.loads(out.read_text())
    assert saved["rows"] == [row]
    assert saved["command"] == f"python benchmarks/token_loop.py --quick --out {out}"
    printed = capsys.readouterr().out
    assert "auto x host auto" in printed and f"wrote {out}" in printed
