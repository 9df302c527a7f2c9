"""Tool domains by name: the six built-in ones, the shipped `synthetic` family and `formulas`
calculators, and a user's own named by dotted path.

A domain is a `Domain` (see `base.py`): JSON-schema tool declarations, a pure Python
implementation per tool over deterministic tables, and task makers per kind
(`single`, `parallel`, `chained`; recovery and long-context tasks reuse them; an optional
`irrelevance` maker replaces the generic off-topic prompts) that return an `Example` with the
calls a correct solution makes and, optionally, the few tools the task offers.
`resolve("mypkg.stocks:DOMAIN")` imports a user's domain, checks it, and registers it under
its name so tasks that name it find its tools wherever they are played.

`BUILTIN` are the six domains a round uses when it names none (and the canaries use);
`synthetic` (`synthetic/`: hundreds of seeded tools) and `formulas` (calculators) ship beside
them and are used only where a round names them.
"""
from __future__ import annotations

from .. import dotted
from . import calendar, currency, flights, formulas, inventory, synthetic, units, weather
from .base import Domain, ToolError

BUILTIN: dict[str, Domain] = {m.DOMAIN.name: m.DOMAIN for m in
                              (weather, currency, calendar, inventory, units, flights)}
SHIPPED: dict[str, Domain] = {**BUILTIN, synthetic.DOMAIN.name: synthetic.DOMAIN,
                              formulas.DOMAIN.name: formulas.DOMAIN}
NOT_DISTRACTORS = {formulas.DOMAIN.name}   # never offered beside another domain's request
DOMAINS: dict[str, Domain] = dict(SHIPPED)   # shipped plus every domain resolved so far
MAKER_KINDS = ("single", "parallel", "chained", "irrelevance")
_RESOLVED: dict[str, Domain] = {}            # dotted path -> the domain it named


def problems(domain: Domain) -> list[str]:
    """What is wrong with a domain's shape (empty when it is usable)."""
    out = []
    declared = [t.get("function", t).get("name") for t in domain.tools]
    if not domain.name or not isinstance(domain.name, str):
        out.append("it has no name")
    if len(set(declared)) != len(declared):
        out.append(f"tool names repeat: {declared}")
    missing = [n for n in declared if n not in domain.impl]
    if missing:
        out.append(f"declared tools without an implementation: {missing}")
    undeclared = [n for n in domain.impl if n not in declared]
    if undeclared:
        out.append(f"implementations without a declaration: {undeclared}")
    odd = [k for k in domain.makers if k not in MAKER_KINDS]
    if odd:
        out.append(f"makers for unknown kinds {odd}; makers are {list(MAKER_KINDS)}")
    return out


def resolve(spec: str) -> Domain:
    """The domain named `spec`: a built-in name, or `pkg.module:ATTR` (`pkg.module` alone
    reads its `DOMAIN`). Raises ValueError saying what is missing."""
    if spec in DOMAINS:
        return DOMAINS[spec]
    if spec in _RESOLVED:
        return _RESOLVED[spec]
    domain = dotted.load(spec, "domain", default_attr="DOMAIN",
                         unknown=f"unknown domain {spec!r}; built-in: {', '.join(SHIPPED)}, or "
                                 "a module path pkg.module[:DOMAIN]")
    if not isinstance(domain, Domain):
        raise ValueError(f"domain {spec!r} is not a data.envs.Domain (tools, impl, makers)")
    wrong = problems(domain)
    if wrong:
        raise ValueError(f"domain {spec!r}: " + "; ".join(wrong))
    known = DOMAINS.get(domain.name)
    if known is not None and known is not domain:
        raise ValueError(f"domain {spec!r} is named {domain.name!r}, which another domain "
                         "already uses; give it another name")
    DOMAINS[domain.name] = _RESOLVED[spec] = domain
    return domain


__all__ = ["BUILTIN", "DOMAINS", "NOT_DISTRACTORS", "SHIPPED", "Domain", "ToolError", "problems",
           "resolve"]
