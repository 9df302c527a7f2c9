"""What training must never see: every prompt the project evaluates on, by source.

  canary  the built-in canary suites (generated with split "canary")
  file    the suites read from `canaries.files` (BFCL-style or GSM8K-style files)
  bfcl    every user message of every BFCL v4 category in the installed `bfcl-eval`, whether
          or not a run evaluates on it (`pipeline eval --bfcl` and `canaries.bfcl` may)

Generated tasks, task-file rows, teacher rows and accepted trajectories are all checked
against these (`data.filters.Decontaminator`: normalised hash and 13-gram overlap), and each
drop is counted under the source it matched.
"""
from __future__ import annotations

import logging
import time
from typing import Iterable

from data.filters import Decontaminator

from .canaries import Suite, canary_prompts

log = logging.getLogger("toolsmith")
BUILT_IN = "built-in"  # Suite.source of the generated canaries


def bfcl_prompts() -> list[str]:
    """Every BFCL user message; empty, with a warning, when bfcl-eval is not installed."""
    from .bfcl_canary import protected_prompts
    try:
        return protected_prompts()
    except FileNotFoundError as err:
        log.warning("decontamination: BFCL prompts are not protected: %s", err)
        return []


def protected_sources(suites: Iterable[Suite], bfcl: bool = True) -> dict[str, list[str]]:
    """source -> its prompts: the built-in canaries, the configured files, and BFCL."""
    suites = list(suites)
    return {"canary": canary_prompts(s for s in suites if s.source == BUILT_IN),
            "file": canary_prompts(s for s in suites if s.source != BUILT_IN),
            "bfcl": bfcl_prompts() if bfcl else []}


def decontaminator_for(suites: Iterable[Suite], bfcl: bool = True) -> Decontaminator:
    """The run's decontamination filter over every evaluation prompt (about 0.7 s with BFCL,
    most of it reading BFCL's question files once per process)."""
    t0 = time.perf_counter()
    guard = Decontaminator(protected_sources(suites, bfcl))
    log.info("decontamination: %s protected prompts (%.1f s)",
             ", ".join(f"{n} {source}" for source, n in guard.sizes.items()),
             time.perf_counter() - t0)
    return guard
