"""Fuzz the device parser against the host grammars for a chosen time.

Round-robin over every distinct grammar of the registered games (plus ``BoxedInts``)
and both tokenizers (``qwen3``, ``bytes``): each round draws a batch of token-id
sequences (encoded responses with rendered valid actions and attacks, random ids,
broken UTF-8; ``tests/bridge/fuzz_cases.py``), parses it on device in one jitted
``vmap`` call and compares action, ok and echo texts with
``grammar.parse(tokenizer.decode(ids[:length]))`` (the decoded window on overflow).
Crashes are counted, not raised.

Usage: ``python benchmarks/fuzz_parser.py --seconds 120 [--batch 256] [--seed 0]``;
prints counts per grammar and tokenizer and writes
``benchmarks/results/fuzz_parser.json``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import jax
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "bridge"))

from fuzz_cases import (  # noqa: E402
    Vocabulary,
    disagreements,
    game_grammars,
    pad,
    token_cases,
)

from gemjax.tokenizer_bridge.parse import TokenParser  # noqa: E402
from gemjax.tokenizer_bridge.tokenizers import load_tokenizer  # noqa: E402

WIDTH = 64
MAX_BYTES = 256


def run_round(
    parser: TokenParser, parse: Any, vocab: Vocabulary, cases: list[list[int]]
) -> list[str]:
    """Parse one batch on device; the disagreements with the host oracle."""
    ids, lengths = pad(cases, WIDTH)
    texts = [vocab.window_text(list(r[:n]), MAX_BYTES) for r, n in zip(ids, lengths, strict=True)]
    expected = [parser.grammar.parse(text) for text in texts]
    parsed = jax.tree.map(np.asarray, parse(ids, lengths))
    return disagreements(parser, parsed, expected, texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    vocabs = {name: Vocabulary(load_tokenizer(name)) for name in ("qwen3", "bytes")}
    grammars = game_grammars()
    rng = random.Random(args.seed)
    counts: dict[str, dict[str, Any]] = {}
    setups = {}
    for (g_name, grammar), (t_name, vocab) in itertools.product(grammars.items(), vocabs.items()):
        device = TokenParser(grammar, vocab.tokenizer, max_bytes=MAX_BYTES)
        streams = token_cases(vocab, grammar, random.Random(rng.random()))
        setups[f"{g_name}/{t_name}"] = (
            device,
            jax.jit(jax.vmap(device.parse_full)),
            vocab,
            streams,
        )
        counts[f"{g_name}/{t_name}"] = {
            "cases": 0,
            "disagreements": 0,
            "crashes": 0,
            "examples": [],
        }

    start = time.perf_counter()
    for key in itertools.cycle(list(setups)):
        if time.perf_counter() - start > args.seconds:
            break
        device, parse, vocab, streams = setups[key]
        cases = [next(streams) for _ in range(args.batch)]
        entry = counts[key]
        entry["cases"] += len(cases)
        try:
            problems = run_round(device, parse, vocab, cases)
        except Exception:  # a crash is a finding: counted and shown
            entry["crashes"] += 1
            entry["examples"].append(traceback.format_exc(limit=3))
            continue
        entry["disagreements"] += len(problems)
        entry["examples"] += problems[: max(0, 3 - len(entry["examples"]))]
    elapsed = time.perf_counter() - start

    total = {k: sum(c[k] for c in counts.values()) for k in ("cases", "disagreements", "crashes")}
    print(f"{'grammar/tokenizer':36} {'cases':>8} {'disagree':>9} {'crashes':>8}")
    for key, entry in counts.items():
        print(f"{key:36} {entry['cases']:8d} {entry['disagreements']:9d} {entry['crashes']:8d}")
        for example in entry["examples"]:
            print("   ", example[:300])
    print(f"{'total':36} {total['cases']:8d} {total['disagreements']:9d} {total['crashes']:8d}")
    print(f"{elapsed:.0f} s, max_bytes {MAX_BYTES}, {WIDTH} ids per case, batch {args.batch}")
    out = ROOT / "benchmarks" / "results" / "fuzz_parser.json"
    result = {
        "seconds": elapsed,
        "seed": args.seed,
        "batch": args.batch,
        "max_bytes": MAX_BYTES,
        "ids_per_case": WIDTH,
        "total": total,
        "by_grammar_and_tokenizer": counts,
    }
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
