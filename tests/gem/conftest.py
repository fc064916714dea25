"""Shared fixtures of the GEM parity tests."""

import random

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _keep_global_rng():
    """GEM's ``reset(seed)`` reseeds the process-global RNGs; restore them after each test."""
    py_state, np_state = random.getstate(), np.random.get_state()
    yield
    random.setstate(py_state)
    np.random.set_state(np_state)


@pytest.fixture(scope="session")
def nltk_words(tmp_path_factory):
    """Point NLTK at the word lists shipped in gemjax (``corpora/words/{en,en-basic,README}``
    in a tmp folder), so GEM's Wordle and Hangman run offline. Request it before any
    GEM word game is constructed."""
    import os

    import nltk

    from gemjax.envs.words import write_nltk_data

    root = write_nltk_data(tmp_path_factory.mktemp("nltk_data"))
    previous = os.environ.get("NLTK_DATA")
    os.environ["NLTK_DATA"] = str(root)
    nltk.data.path.insert(0, str(root))
    yield root
    nltk.data.path.remove(str(root))
    if previous is None:
        os.environ.pop("NLTK_DATA", None)
    else:
        os.environ["NLTK_DATA"] = previous
