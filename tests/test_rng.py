"""gemjax.rng: the unrolled Threefry (known answers, the same keys and bits as
``jax.random``), ``materialize``, and ``random_words`` (deterministic, distinct, uniform,
independent across keys)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gemjax.rng import (
    below,
    bits,
    materialize,
    mix32,
    mixed_words,
    random_words,
    split,
    stream_key,
    threefry2x32,
)

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


def test_mixed_words_are_random_words_one_at_a_time() -> None:
    key = jax.random.key(9)
    seed = bits(key, 2)
    counter = jnp.arange(40, dtype=jnp.uint32)
    np.testing.assert_array_equal(
        np.asarray(mixed_words(seed, counter)), np.asarray(random_words(key, 40))
    )
    picked = jax.jit(lambda k: mixed_words(seed, k))(jnp.uint32(17))
    assert int(picked) == int(random_words(key, 40)[17])


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
        # A Python int takes the short form below 2**15, the general one above.
        short = np.asarray(jax.jit(below, static_argnums=1)(jnp.asarray(words), n))
        assert short.tolist() == expected, n
    for n in (2**15 - 1, 2**15):
        short = np.asarray(jax.jit(below, static_argnums=1)(jnp.asarray(words), n))
        assert short.tolist() == [(int(w) * n) >> 32 for w in words], n


def test_below_is_uniform():
    words = random_words(jax.random.key(3), 60_000)
    for n in (3, 10, 26):
        counts = np.bincount(np.asarray(below(words, n)), minlength=n)
        assert stats.chisquare(counts).pvalue > 1e-4, (n, counts)


# Random123's known-answer vectors for Threefry-2x32 with 20 rounds:
# (key words, counter words) -> output words.
THREEFRY_KAT = [
    ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


@pytest.mark.parametrize(("key", "counter", "expected"), THREEFRY_KAT)
def test_threefry_known_answers(key, counter, expected) -> None:
    words = tuple(jnp.uint32(w) for w in key), tuple(jnp.uint32(w) for w in counter)
    assert tuple(int(w) for w in threefry2x32(*words)) == expected


def key_rows(keys: jax.Array) -> np.ndarray:
    """uint32[..., 2] of typed or raw keys."""
    typed = jnp.issubdtype(keys.dtype, jax.dtypes.prng_key)
    return np.asarray(jax.random.key_data(keys) if typed else keys)


def uses_jax_random(function, *args) -> bool:
    """``function`` traces to one of ``jax.random``'s primitives."""
    jaxpr = str(jax.make_jaxpr(function)(*args))
    return any(name in jaxpr for name in ("random_bits", "random_split", "threefry2x32"))


@pytest.mark.parametrize("make_key", [jax.random.key, jax.random.PRNGKey], ids=["typed", "raw"])
def test_bits_and_split_equal_jax_random_without_its_loop(make_key) -> None:
    key = make_key(123)
    for count in (0, 1, 2, 3, 9):
        expected = jax.random.bits(key, (count,), jnp.uint32)
        np.testing.assert_array_equal(np.asarray(bits(key, count)), np.asarray(expected))
        np.testing.assert_array_equal(
            np.asarray(jax.jit(bits, static_argnums=1)(key, count)), np.asarray(expected)
        )
    for num in (1, 2, 5):
        ours, theirs = split(key, num), jax.random.split(key, num)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_array_equal(key_rows(ours), key_rows(theirs))
    lanes = jax.random.split(key, 6)
    np.testing.assert_array_equal(
        np.asarray(jax.vmap(lambda k: bits(k, 3))(lanes)),
        np.asarray(jax.vmap(lambda k: jax.random.bits(k, (3,), jnp.uint32))(lanes)),
    )
    np.testing.assert_array_equal(
        key_rows(jax.vmap(lambda k: split(k, 2))(lanes)),
        key_rows(jax.vmap(lambda k: jax.random.split(k, 2))(lanes)),
    )
    assert not uses_jax_random(lambda k: (bits(k, 2), split(k, 4)), key)


def test_bits_and_split_defer_to_jax_random_for_other_generators() -> None:
    rbg = jax.random.key(5, impl="rbg")
    np.testing.assert_array_equal(
        np.asarray(bits(rbg, 4)), np.asarray(jax.random.bits(rbg, (4,), jnp.uint32))
    )
    np.testing.assert_array_equal(key_rows(split(rbg, 3)), key_rows(jax.random.split(rbg, 3)))
    key = jax.random.key(5)
    with jax.threefry_partitionable(False):
        np.testing.assert_array_equal(
            np.asarray(bits(key, 4)), np.asarray(jax.random.bits(key, (4,), jnp.uint32))
        )
        np.testing.assert_array_equal(key_rows(split(key, 3)), key_rows(jax.random.split(key, 3)))
        assert uses_jax_random(lambda k: bits(k, 2), key)
        assert uses_jax_random(lambda k: split(k, 2), key)


@pytest.mark.parametrize("make_key", [jax.random.key, jax.random.PRNGKey], ids=["typed", "raw"])
def test_stream_key_is_the_hash_of_its_own_counter_block(make_key) -> None:
    """A stream key is Threefry of the counter (stream, 0): no word of the key's own
    bits, splits or longer draws, deterministic, and distinct per stream."""
    key = make_key(7)
    derived = stream_key(key, 1)
    assert derived.dtype == key.dtype and derived.shape == key.shape
    words = np.asarray(jax.random.key_data(key) if derived.dtype != jnp.uint32 else key)
    expected = threefry2x32(tuple(jnp.uint32(w) for w in words), (jnp.uint32(1), jnp.uint32(0)))
    np.testing.assert_array_equal(key_rows(derived), np.asarray(expected))
    np.testing.assert_array_equal(
        key_rows(jax.jit(stream_key, static_argnums=1)(key, 1)), key_rows(derived)
    )
    own = set(key_rows(split(key, 64)).reshape(-1).tolist()) | set(
        np.asarray(random_words(key, 256)).tolist()
    )
    rows = [key_rows(stream_key(key, s)) for s in (1, 2, 3)]
    assert not own & set(np.concatenate(rows).tolist())
    assert len({row.tobytes() for row in rows}) == 3
    with pytest.raises(ValueError, match="stream"):
        stream_key(key, 0)


def test_stream_key_folds_in_for_other_generators() -> None:
    rbg = jax.random.key(5, impl="rbg")
    np.testing.assert_array_equal(
        key_rows(stream_key(rbg, 1)), key_rows(jax.random.fold_in(rbg, 0x40000001))
    )


def test_materialize_returns_the_computed_tree_under_jit_and_vmap() -> None:
    def compute(x: jax.Array) -> dict[str, jax.Array]:
        return materialize(lambda: {"twice": 2 * x, "parts": (x + 1, x.astype(jnp.float32))})

    x = jnp.arange(5, dtype=jnp.int32)
    for value in (compute(x), jax.jit(compute)(x), jax.vmap(compute)(x)):
        np.testing.assert_array_equal(np.asarray(value["twice"]), 2 * np.arange(5))
        np.testing.assert_array_equal(np.asarray(value["parts"][0]), np.arange(1, 6))
        assert value["parts"][1].dtype == jnp.float32
