"""Every generated section of ``docs/results.md`` equals what its benchmark script
renders from the committed JSON (no figure there is copied by hand)."""

import importlib.util
import json
from pathlib import Path

import jax
import pytest

from gemjax.benchmark import read_section

ROOT = Path(__file__).parents[2]


def load(script: str):
    spec = importlib.util.spec_from_file_location(Path(script).stem, ROOT / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("script", "result"),
    [
        ("benchmarks/algorithms.py", "algorithms.json"),
        ("benchmarks/discount_sweep.py", "discount_sweep.json"),
        ("benchmarks/optima.py", "optima.json"),
        ("benchmarks/default_run.py", "default_run.json"),
    ],
)
def test_the_docs_section_is_rendered_from_the_committed_json(script, result):
    bench = load(script)
    results = json.loads((bench.RESULTS / result).read_text())
    assert script == bench.OWNER
    assert read_section(bench.DOCS, script).strip() == bench.render_docs(results).strip()


def test_the_policy_design_section_is_rendered_from_its_json():
    bench = load("benchmarks/algorithms.py")
    results = json.loads((bench.DESIGN_OUT.with_suffix(".json")).read_text())
    rendered = bench.render_docs(results, "policy_design.png")
    assert read_section(bench.DOCS, bench.DESIGN_OWNER).strip() == rendered.strip()


@pytest.mark.parametrize("suite", ["solve", "screen"])
def test_a_suite_section_is_rendered_from_its_json(suite):
    bench = load("benchmarks/default_run.py")
    results = json.loads((bench.RESULTS / bench.SUITES[suite].result).read_text())
    section = read_section(bench.DOCS, bench.SUITES[suite].owner(suite))
    assert section.strip() == bench.render_docs(results).strip()


def test_the_default_run_is_also_scored_on_every_target_once():
    bench = load("benchmarks/default_run.py")
    trainer = bench.make_train(bench.TrainConfig())
    keys = bench.target_keys(trainer)
    states, _ = jax.vmap(trainer.rollout.env.reset, in_axes=(0, None))(
        keys, trainer.rollout.env_params
    )
    assert states.target.tolist() == list(range(1, 51))
    with pytest.raises(ValueError, match="not drawn"):
        bench.target_keys(trainer, draws=8)
