"""Task kinds: one registry, open like the domains.

A kind declares how one of its tasks is built (`build`: a `Draw` -> the task and the example
its oracle plays), which domain makers a domain needs to make it, whether `kind@domain` may
pin it to one domain, whether a round cycles it over its domains, whether a domain can be
validated on it alone, and which built-in canaries draw their items from it. The built-in
kinds register in `data.tasks`; a user's domain module may `register` its own at import, and
a round that names that domain can then ask for the kind in its `tasks:`.

    from data.kinds import Draw, TaskKind, register
    register(TaskKind("lookup_twice", build=my_builder, needs=("single",)))
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Draw:
    """What a builder gets for one task: its id and seed, a generator seeded from them, the
    domains it may draw from (sorted names), its index within the kind, and the round's
    offer size and context length."""
    id: str
    seed: int
    rng: random.Random = field(compare=False)
    domains: list[str]
    index: int
    offered_tools: int
    context_tokens: int


@dataclass(frozen=True)
class TaskKind:
    name: str
    build: Callable[[Draw], tuple]         # Draw -> (Task, Example)
    needs: tuple[str, ...] = ()            # domain makers, any one of which makes it; () = any
    pinnable: bool = False                 # `kind@domain` draws it from that domain only
    balanced: bool = False                 # a round's tasks cycle through its domains
    per_domain: bool = True                # a domain can be validated on it alone
    canaries: tuple[str, ...] = ()         # built-in canaries whose items it makes
    doc: str = ""


KINDS: dict[str, TaskKind] = {}


def register(kind: TaskKind) -> TaskKind:
    """Add `kind` to the registry; a name already taken by another kind is an error."""
    if not kind.name or "@" in kind.name or not kind.name.replace("_", "").isalnum():
        raise ValueError(f"task kind name {kind.name!r}: use letters, digits and underscores")
    known = KINDS.get(kind.name)
    if known is not None and known is not kind:
        raise ValueError(f"task kind {kind.name!r} is registered already; choose another name")
    KINDS[kind.name] = kind
    return kind


def get(name: str) -> TaskKind:
    """The kind `name`; ValueError listing the registered ones."""
    if name not in KINDS:
        raise ValueError(f"unknown task kind {name!r}; choose from {', '.join(KINDS)}")
    return KINDS[name]


def canary_kinds() -> dict[str, tuple[str, ...]]:
    """Built-in canary -> the kinds its items come from, in registration order."""
    out: dict[str, tuple[str, ...]] = {}
    for k in KINDS.values():
        for c in k.canaries:
            out[c] = out.get(c, ()) + (k.name,)
    return out
