"""Fixtures of the Python module's tests (ctest python.*; run by /usr/bin/python3 -m pytest).

PYTHONPATH names the planrt package under test (the build tree's python/ folder, or an
installed one); PLANRT_CLI the planrt executable the CLI-equality test compares with;
PLANRT_TEST_DATA the repository's tests/data.
"""
import os
import pathlib

import numpy as np
import pytest

import planrt

DATA = pathlib.Path(os.environ.get("PLANRT_TEST_DATA",
                                   pathlib.Path(__file__).resolve().parents[1] / "data"))


@pytest.fixture(scope="session")
def mlp_json():
    return DATA / "models" / "mlp.json"


@pytest.fixture(scope="session")
def two_methods_json():
    return DATA / "models" / "two_methods.json"


@pytest.fixture(scope="session")
def encoder():
    """A one-block template encoder (d_model 64, 4 heads) on the cpu partition, S in [1, 32]."""
    return planrt.build(template="transformer", layers=1, d_model=64, heads=4, ffn=128,
                        max_seq=32)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
