"""gemjax.rng.random_words: deterministic, distinct, uniform, independent across keys."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gemjax.rng import below, mix32, random_words

CHI2_9_P001 = 27.877164871256575  # scipy.stats.chi2.isf(0.001, 9)
KEYS, WORDS = 2000, 64


@pytest.fixture(scope="module")
def streams() -> np.ndarray:
    """uint32[KEYS, WORDS]: the words of many split keys (jitted, vmapped)."""
    keys = jax.random.split(jax.random.key(7), KEYS)
    return np.asarray(jax.jit(jax.vmap(lambda k: random_words(k, WORDS)))(keys))


def chi2_uniform(values: np.ndarray, bins: int) -> float:
    counts = np.bincount(values.ravel(), minlength=bins).astype(np.float64)
    expected = counts.sum() / bins
    return float(((counts - expected) ** 2 / expected).sum())


def test_mix32_is_a_bijection_on_a_sample() -> None:
    values = np.arange(1 << 16, dtype=np.uint32) * np.uint32(40503)
    assert len(np.unique(np.asarray(mix32(values)))) == len(values)


def test_words_are_deterministic_and_match_jit_and_eager() -> None:
    key = jax.random.key(3)
    eager = np.asarray(random_words(key, 100))
    assert eager.dtype == np.uint32 and eager.shape == (100,)
    np.testing.assert_array_equal(
        eager, np.asarray(jax.jit(random_words, static_argnums=1)(key, 100))
    )
    raw = jax.random.PRNGKey(3)
    np.testing.assert_array_equal(eager, np.asarray(random_words(raw, 100)))


def test_up_to_two_words_are_threefry_bits() -> None:
    key = jax.random.key(11)
    for count in (0, 1, 2):
        np.testing.assert_array_equal(
            np.asarray(random_words(key, count)),
            np.asarray(jax.random.bits(key, (count,), np.uint32)),
        )


def test_longer_streams_never_repeat_a_word_within_a_call() -> None:
    words = np.asarray(random_words(jax.random.key(5), 100_000))
    assert len(np.unique(words)) == len(words)


def test_streams_of_different_keys_are_unrelated(streams: np.ndarray) -> None:
    # Equal words at the same position of two streams: 2000 * 1999 / 2 pairs * 64
    # positions at chance 2**-32 expect ~0.03 matches.
    for position in range(0, WORDS, 8):
        column = streams[:, position]
        assert len(np.unique(column)) >= KEYS - 1
    # Neighbouring words in one stream and the same word across neighbouring keys
    # are uncorrelated (|r| under 5 sigma of the null's 1/sqrt(n)).
    centred = streams.astype(np.float64) - 2**31
    limit = 5 / np.sqrt(streams.size)
    within = np.corrcoef(centred[:, :-1].ravel(), centred[:, 1:].ravel())[0, 1]
    across = np.corrcoef(centred[:-1].ravel(), centred[1:].ravel())[0, 1]
    assert abs(within) < limit and abs(across) < limit


def looks_uniform(words: np.ndarray) -> bool:
    """10-bin chi-square of the top bits and of ``% 10``, and every bit's frequency
    within 5 sigma of 1/2."""
    high = ((words.astype(np.uint64) * 10) >> 32).astype(np.int64)
    low = (words % 10).astype(np.int64)
    bits = (words.ravel()[:, None] >> np.arange(32, dtype=np.uint32)) & 1
    balanced = np.abs(bits.mean(axis=0) - 0.5) < 5 * 0.5 / np.sqrt(words.size)
    return bool(
        chi2_uniform(high, 10) < CHI2_9_P001
        and chi2_uniform(low, 10) < CHI2_9_P001
        and balanced.all()
    )


def test_words_are_uniform_in_high_and_low_bits_and_every_bit_is_balanced(
    streams: np.ndarray,
) -> None:
    assert looks_uniform(streams)
    assert looks_uniform(streams[:, 0]) and looks_uniform(streams[:, -1])  # per position


def test_the_uniformity_check_rejects_biased_words(streams: np.ndarray) -> None:
    assert not looks_uniform(streams | 1)  # one bit stuck
    assert not looks_uniform(streams % (9 * 2**28))  # top tenth never drawn
    assert not looks_uniform(streams - streams % 10)  # last decimal digit always 0


def test_below_is_the_high_word_of_the_product():
    """Exact against Python integers on edge words and divisors up to 2**31."""
    rng = np.random.default_rng(0)
    words = np.concatenate(
        [np.array([0, 1, 0xFFFF, 0x10000, 2**31, 2**32 - 1]), rng.integers(0, 2**32, 2000)]
    ).astype(np.uint32)
    for n in (1, 2, 3, 7, 26, 255, 65535, 65536, 65537, 10**6 + 3, 2**31 - 1, 2**31):
        got = np.asarray(jax.jit(below)(jnp.asarray(words), np.uint32(n)))
        expected = [(int(w) * n) >> 32 for w in words]
        assert got.tolist() == expected, n
        assert got.min() >= 0 and got.max() < n


def test_below_is_uniform():
    words = random_words(jax.random.key(3), 60_000)
    for n in (3, 10, 26):
        counts = np.bincount(np.asarray(below(words, n)), minlength=n)
        assert stats.chisquare(counts).pvalue > 1e-4, (n, counts)
