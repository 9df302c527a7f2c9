"""Synthetic APIs: hundreds of seeded tools, so a model learns to read schemas (and to leave
tools alone when none fits) rather than memorise a handful of domains.

`build(seed, n_tools)` samples a family (see `family.py`): things with tables of records and
per thing a few operations in one of several naming conventions (`get_dam_height`,
`getDamHeight`, `dam_get_height`, `dam.get_height`), with string, enum, integer, number,
boolean, array and nested-object parameters, required and optional ones with defaults. Every
tool checks its arguments against its declared schema and answers from deterministic tables;
unknown names and ids are `not_found`. Its makers (`makers.py`) offer each task only the
tools it needs plus a few others of the family. The same seed gives the same tools and tasks.

`DOMAIN` (seed 0, 300 tools) is registered as the shipped domain `synthetic`; a round uses
it when named in `rounds.<round>.domains`. Another family is a module of your own:
`DOMAIN = build(seed=7, name="synthetic7")`.
"""
from __future__ import annotations

from ..base import Domain
from .family import Family, build_family
from .makers import makers

SEED, N_TOOLS = 0, 300


def build(seed: int = SEED, n_tools: int = N_TOOLS, name: str = "synthetic") -> Domain:
    """A domain of `n_tools` synthetic tools sampled from `seed`."""
    fam = build_family(seed, n_tools)
    return Domain(name, [s.decl for s in fam.specs], {s.name: s.run for s in fam.specs},
                  makers(fam))


DOMAIN = build()

__all__ = ["DOMAIN", "Family", "N_TOOLS", "SEED", "build", "build_family"]
