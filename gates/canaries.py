"""Canary suites: held-out, fixed, versioned item sets the gate evaluates every round.

Built-in suites come from the task generators with `split="canary"` and the namespace
`canary-<version>`, seeds the training generators never use; their prompts also feed the
decontamination filter (`canary_prompts`). A suite can also be a user file: BFCL-style
question / possible-answer files (scored by `gates.ast_check`) or GSM8K-style math.
A suite's content hash goes into every report, so a baseline is only ever compared with a
candidate evaluated on the very same items.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from data.loaders import bfcl_task, load_bfcl, load_gsm8k
from data.tasks import CANARY_KINDS, make
from data.trajectory import Task

from .ast_check import first_accepted

# scorer -> the per-item metrics it computes (each in [0, 1]); the first is the primary one
METRICS: dict[str, tuple[str, ...]] = {
    "reasoning": ("accuracy", "pass@k"),
    "recovery": ("recovery_rate", "pass@k"),
    "single_turn": ("exact", "args", "name", "has_call"),
    "multi_turn": ("success", "pass@k"),
    "irrelevance": ("no_call",),
    # right calls and right abstentions apart: `calls` over items with a fitting tool,
    # `abstentions` over items without one; `correct` over all of them
    "many_tools": ("correct", "calls", "abstentions"),
    "long_context": ("success", "pass@k"),
    "bfcl": ("exact", "args", "name", "has_call"),
}


@dataclass
class Suite:
    name: str                 # the canary name used in reports and thresholds
    version: str
    scorer: str               # a key of METRICS: how an item's samples become metric values
    items: list[Task]
    source: str = "built-in"  # or the user file it was read from
    truth: dict[str, list] = field(default_factory=dict)  # BFCL possible answers by task id

    @property
    def primary(self) -> str:
        return METRICS[self.scorer][0]

    @property
    def metrics(self) -> tuple[str, ...]:
        return METRICS[self.scorer]

    @property
    def hash(self) -> str:
        """sha256 of everything that defines the items and how they are scored."""
        body = json.dumps({"scorer": self.scorer, "truth": self.truth,
                           "items": [t.model_dump(mode="json") for t in self.items]},
                          sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(body.encode()).hexdigest()

    def describe(self) -> dict:
        return {"name": self.name, "version": self.version, "scorer": self.scorer,
                "source": self.source, "n_items": len(self.items), "hash": self.hash,
                "primary": self.primary}


LONG_CONTEXT_TOKENS = (2000,)  # lengths of the long_context canary when no round gives any


def builtin_suite(name: str, n: int, version: str = "v1", domains: Iterable[str] | None = None,
                  context_tokens: Sequence[int] = LONG_CONTEXT_TOKENS) -> Suite:
    """Canary `name` with `n` items, split evenly over its generator kinds. The long_context
    canary's items cycle through `context_tokens` (the long-context round's lengths: many
    distractor tools, padded tool outputs, earlier turns), each length's items prefix-stable;
    its namespace names the lengths, so other lengths make other items."""
    if name not in CANARY_KINDS:
        raise ValueError(f"unknown canary {name!r}; choose from {', '.join(CANARY_KINDS)}")
    if n < 0:
        raise ValueError(f"canary {name}: size must be >= 0, got {n}")
    kinds = CANARY_KINDS[name]
    if name == "long_context":
        lengths = list(context_tokens) or list(LONG_CONTEXT_TOKENS)
        items = [make("long_context", i // len(lengths), split="canary",
                      namespace=f"canary-{version}-{lengths[i % len(lengths)]}",
                      domains=domains, context_tokens=lengths[i % len(lengths)])
                 for i in range(n)]
    else:
        items = [make(kinds[i % len(kinds)], i // len(kinds), split="canary",
                      namespace=f"canary-{version}", domains=domains) for i in range(n)]
    return Suite(name, version, name, items)


def build_suites(sizes: dict[str, int], version: str = "v1",
                 domains: Iterable[str] | None = None,
                 context_tokens: Sequence[int] = LONG_CONTEXT_TOKENS) -> list[Suite]:
    """The built-in canaries, e.g. `build_suites({"reasoning": 20, "single_turn": 20})`."""
    return [builtin_suite(name, n, version, domains, context_tokens)
            for name, n in sizes.items() if n > 0]


def bfcl_suite(name: str, questions: str | Path, answers: str | Path | None = None,
               limit: int | None = None, version: str = "file") -> Suite:
    """A BFCL-style file as a suite: call categories are AST-checked, irrelevance categories
    score `no_call`."""
    items = load_bfcl(questions, answers, limit)
    tasks, truth = [], {}
    for it in items:
        gold = first_accepted(it.ground_truth, it.functions) if it.ground_truth else []
        task = bfcl_task(it, gold)
        tasks.append(task)
        if it.ground_truth is not None:
            truth[task.id] = it.ground_truth
    scorer = "bfcl" if truth else "irrelevance"
    if truth and len(truth) != len(tasks):
        raise ValueError(f"{questions}: mixes items with and without possible answers; split "
                         f"call and irrelevance items into separate suites")
    return Suite(name, version, scorer, tasks, source=str(questions), truth=truth)


def gsm8k_suite(name: str, path: str | Path, limit: int | None = None,
                version: str = "file") -> Suite:
    """A GSM8K-style math file as a reasoning suite."""
    return Suite(name, version, "reasoning", load_gsm8k(path, limit).items, source=str(path))


def canary_prompts(suites: Iterable[Suite]) -> list[str]:
    """Every prompt (and earlier user turn) of the suites, for the decontamination filter.
    A long_context item's earlier turns are left out: they are filler notes cut from one
    19-word cycle that every long task shares (padding, not the item's identity), and
    their `Note <n>:` openings would match most training tasks' notes."""
    seen, out = set(), []
    for s in suites:
        for t in s.items:
            history = [] if t.kind == "long_context" else t.history
            texts = [t.prompt] + [m.get("content", "") for m in history if m.get("role") == "user"]
            for text in texts:
                if text and text not in seen:
                    seen.add(text)
                    out.append(text)
    return out
