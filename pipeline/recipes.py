"""Round recipes by name or dotted path (their settings classes: `rounds/settings.py`).

A recipe is a module (or any object) with `run(ctx) -> Candidate` and `SETTINGS`, the
pydantic class of the config keys it uses. The five built-in recipes are named in `BUILTIN`;
any other is a dotted path, `package.module` or `package.module:object`, so a user adds or
replaces a round without editing this package:

    rounds:
      grounding: {tasks: {single: 8}}          # built-in recipe named like the round
      my_round: {recipe: mypkg.rounds:polish, tasks: {chained: 4}}
"""
from __future__ import annotations

from typing import Any

from data import dotted
from data.canary_names import BFCL_PREFIX, CANARIES, canary_choices, is_canary  # noqa: F401
from rounds.settings import RoundSettings

BUILTIN = {"grounding": "rounds.grounding", "plan_finish": "rounds.plan_finish",
           "long_context": "rounds.long_context", "self_improve": "rounds.self_improve",
           "rl_polish": "rounds.rl_polish"}


def resolve(spec: str) -> Any:
    """The recipe named `spec`: a built-in name, `pkg.module` or `pkg.module:object`.
    Raises ValueError saying what is missing."""
    obj = dotted.load(BUILTIN.get(spec, spec), "recipe",
                      unknown=f"no built-in recipe named {spec!r} (built-in: "
                              f"{', '.join(BUILTIN)}) and no module of that name; give recipe: "
                              "<built-in name> or a dotted path pkg.module[:object]")
    missing = [a for a in ("run", "SETTINGS") if not hasattr(obj, a)]
    if missing:
        raise ValueError(f"recipe {spec!r} lacks {' and '.join(missing)}: a recipe needs "
                         "run(ctx) -> Candidate and SETTINGS, a RoundSettings subclass")
    if not (isinstance(obj.SETTINGS, type) and issubclass(obj.SETTINGS, RoundSettings)):
        raise ValueError(f"recipe {spec!r}: SETTINGS must subclass "
                         "rounds.settings.RoundSettings")
    return obj


def ordered(names: list[str]) -> list[str]:
    """Round order: the config's order, with built-in rounds it leaves out put back in their
    standard place (after the built-in round before them)."""
    out = list(names)
    for i, name in enumerate(BUILTIN):
        if name not in out:
            before = [b for b in list(BUILTIN)[:i] if b in out]
            out.insert(out.index(before[-1]) + 1 if before else 0, name)
    return out
