"""Canary names: the built-in suites (one per generator table in `data.tasks`) and BFCL
categories as canaries (`bfcl_<category>`), for the settings that name canaries."""
from __future__ import annotations

from .bfcl import CATEGORIES as BFCL_CATEGORIES
from .tasks import CANARY_KINDS

CANARIES = tuple(CANARY_KINDS)
BFCL_PREFIX = "bfcl_"  # a BFCL category as a gate canary: bfcl_<category> (canaries.bfcl)


def is_canary(name: str) -> bool:
    """A built-in canary, or `bfcl_<category>` of a BFCL category (whether configured or not:
    the run config checks that)."""
    return name in CANARIES or (name.startswith(BFCL_PREFIX)
                                and name[len(BFCL_PREFIX):] in BFCL_CATEGORIES)


def off_canary_table(table: dict[str, float]) -> dict[str, float]:
    """The entries of a canary -> value table (drop tolerances, floors) whose key is not a
    canary or whose value is outside [0, 1]."""
    return {k: v for k, v in table.items() if not is_canary(k) or not 0 <= v <= 1}


def canary_choices() -> str:
    """The valid canary names, for error messages."""
    return f"{', '.join(CANARIES)} or {BFCL_PREFIX}<category> of a BFCL category " \
           f"({', '.join(BFCL_CATEGORIES)})"
