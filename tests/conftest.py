"""Shared fixtures: the real SmolLM2 tokenizer and a tiny random model (both cached)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tokenizer():
    from engine.models import load_tokenizer, smollm2_tokenizer_dir
    return load_tokenizer(smollm2_tokenizer_dir())


@pytest.fixture(scope="session")
def tiny_model():
    from engine.models import tiny_model_dir
    return tiny_model_dir(64)
