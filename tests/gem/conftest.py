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
