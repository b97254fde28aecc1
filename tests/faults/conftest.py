"""Fixtures of the fault tests: a tiny tokenizer and model folder, built once per test module."""

from __future__ import annotations

from pathlib import Path

import pytest
from fault_helpers import build_model, build_tokenizer


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tok")
    build_tokenizer(folder)
    return folder


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return build_model(tmp_path_factory.mktemp("m") / "model")
