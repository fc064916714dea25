"""The ``gemjax`` command line."""

import io
import json
import re
from contextlib import redirect_stdout

import gemjax
from gemjax import cli


def run(argv, stdin=None, monkeypatch=None):
    out = io.StringIO()
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    with redirect_stdout(out):
        status = cli.main(argv)
    return status, out.getvalue()


def test_list_prints_every_registered_id():
    status, out = run(["list"])
    assert status == 0
    listed = [line.split()[0] for line in out.strip().splitlines()]
    assert listed == gemjax.list_envs()


def test_play_runs_an_episode_with_gem_text(monkeypatch):
    status, out = run(
        ["play", "game:GuessTheNumber-v0-easy", "--seed", "3"],
        stdin="\\boxed{0}\n",
        monkeypatch=monkeypatch,
    )
    assert status == 0
    assert out.startswith("You are playing Guess The Number.\n")
    assert "Enter your next guess." in out
    assert "At turn 1, you did not provide a valid guess." in out
    assert "[reward -0.1, terminated True, truncated False]" in out


def test_play_stops_cleanly_at_end_of_input(monkeypatch):
    status, out = run(["play", "game:GuessTheNumber-v0-hard"], stdin="", monkeypatch=monkeypatch)
    assert status == 0
    assert out.startswith("You are playing Guess The Number.\n")
    assert out.endswith("Enter your next guess.\n> \n")


def test_play_unknown_id_is_a_clear_error(monkeypatch, capsys):
    status, _ = run(["play", "game:GuessTheNumber-v0-eazy"], stdin="", monkeypatch=monkeypatch)
    assert status == 2
    error = capsys.readouterr().err
    assert "Did you mean 'game:GuessTheNumber-v0-easy'" in error
    assert error.count("\n") == 1 and "Traceback" not in error


def test_bench_prints_table_episode_and_writes_json(tmp_path):
    target = tmp_path / "bench.json"
    status, out = run(
        [
            "bench",
            "--env",
            "game:GuessTheNumber-v0-easy",
            "--batch-sizes",
            "8",
            "--steps",
            "20",
            "--json",
            str(target),
        ]
    )
    assert status == 0
    assert re.search(r"game:GuessTheNumber-v0-easy\s+8\s+[\d,]+", out)
    assert "A sample episode" in out and "You are playing Guess The Number." in out
    rows = json.loads(target.read_text())
    assert rows[0]["env_id"] == "game:GuessTheNumber-v0-easy"
    assert rows[0]["batch_size"] == 8 and rows[0]["num_steps"] == 20
    assert rows[0]["steps_per_second"] > 0
    # 160 random lane-steps on a 4-turn game finish episodes.
    assert rows[0]["episodes"] > 0


def test_play_says_that_the_game_ended_and_why(monkeypatch):
    _, out = run(
        ["play", "game:GuessTheNumber-v0-easy", "--seed", "3"],
        stdin="\\boxed{0}\n",
        monkeypatch=monkeypatch,
    )
    assert out.endswith("The game has ended (format error; terminated).\n")
    _, out = run(
        ["play", "game:GuessTheNumber-v0-easy", "--seed", "3"],
        stdin="".join(f"\\boxed{{{n}}}\n" for n in (11, 12, 13, 14)),
        monkeypatch=monkeypatch,
    )
    assert out.endswith("The game has ended (max turns; truncated at the turn limit).\n")


def test_ctrl_c_in_play_exits_quietly(monkeypatch, capsys):
    def interrupted(prompt: str) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr("builtins.input", interrupted)
    assert cli.main(["play", "game:GuessTheNumber-v0-easy"]) == 130
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "KeyboardInterrupt" not in captured.err
    assert captured.out.startswith("You are playing Guess The Number.\n")


def test_an_unknown_env_writes_no_run_directory(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["train", "--env", "game:NoSuchGame-v0", "--out", str(out)]) == 2
    assert "unknown environment id" in capsys.readouterr().err
    assert not out.exists()
