"""Shared fixtures: the real SmolLM2 tokenizer and a tiny random model (both cached), a guard
that forgets the domains and task kinds a test registers, and a wait on a child process."""
from __future__ import annotations

import time

import pytest


@pytest.fixture(scope="session")
def tokenizer():
    from engine.models import load_tokenizer, smollm2_tokenizer_dir
    return load_tokenizer(smollm2_tokenizer_dir())


@pytest.fixture(scope="session")
def tiny_model():
    from engine.models import tiny_model_dir
    return tiny_model_dir(64)


@pytest.fixture
def forget_domains():
    """Domains and task kinds registered during the test are forgotten afterwards, so other
    tests see only the shipped ones."""
    from data import envs, kinds
    before = dict(envs.DOMAINS), dict(envs._RESOLVED), dict(kinds.KINDS)
    yield
    for table, old in zip((envs.DOMAINS, envs._RESOLVED, kinds.KINDS), before):
        table.clear()
        table.update(old)


def wait_for(proc, cond, timeout: float = 600) -> bool:
    """Poll `cond()` until it holds (True) or the child `proc` exits or time runs out (False)."""
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False
