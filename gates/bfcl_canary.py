"""BFCL categories as gate canaries: `canaries.bfcl: {multi_turn_base: 50, simple_python: 100}`.

Each category becomes a suite named `bfcl_<category>` in the shape `gates.evaluate.score_suite`
writes (per-item metric values in [0, 1], aggregates, a content hash), so the gate's paired
statistics and `gates.promote.decide` compare a candidate with its baseline on it as on any
built-in canary. Items are a fixed seeded sample per suite version; the metric is BFCL's own
verdict (`accuracy`: the share of the k samples BFCL's checker passes; `pass@k`).

`protected_prompts` gives every user message of the BFCL categories the project evaluates on
(all items, not only the sampled canaries), for the decontamination filter.
"""
from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter

from data.bfcl import CATEGORIES, MULTI_TURN, load_multi_turn, load_single, user_messages, version
from data.canary_names import BFCL_PREFIX
from engine.sampling.base import Backend, SamplingParams

from .bfcl import Result, params_for, play_multi_turn, play_single_turn, select

METRICS = ("accuracy", "pass@k")


def suite_name(category: str) -> str:
    return BFCL_PREFIX + category


@functools.lru_cache(maxsize=32)
def canary_items(category: str, n: int, version_tag: str = "v1") -> tuple:
    """The suite's items: a seeded sample of `n` (fixed per suite version). Cached: a run
    hashes them at every evaluation and plays them when one is not on disk."""
    if category not in CATEGORIES:
        raise ValueError(f"canaries.bfcl: unknown category {category!r}; choose from "
                         f"{', '.join(CATEGORIES)}")
    items = load_multi_turn(category) if category in MULTI_TURN else load_single(category)
    return tuple(items[i] for i in select(len(items), n, f"canary-{version_tag}", category))


def suite_hash(category: str, items) -> str:
    """sha256 of the package version, the category and the items' questions and answers."""
    body = json.dumps({"bfcl_eval": version(), "category": category,
                       "items": [[i.id, getattr(i, "turns", None) or i.messages,
                                  i.ground_truth] for i in items]},
                      sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


def score(category: str, items: list, results: list[Result], k: int,
          version_tag: str = "v1") -> dict:
    """One suite's table: per item the mean verdict over its k samples and pass@k."""
    by_item: dict[str, list[Result]] = {}
    for r in results:
        by_item.setdefault(r.id, []).append(r)
    table = {}
    for it in items:
        ok = [float(r.score.valid) for r in sorted(by_item[it.id], key=lambda r: r.sample)[:k]]
        if len(ok) < k:
            raise ValueError(f"{suite_name(category)}: item {it.id} has {len(ok)} of {k} samples")
        table[it.id] = {"accuracy": sum(ok) / k, "pass@k": max(ok)}
    n = len(table)
    return {"name": suite_name(category), "version": version_tag,
            "scorer": "bfcl_multi_turn" if category in MULTI_TURN else "bfcl_checker",
            "source": f"bfcl-eval {version()}", "n_items": n, "hash": suite_hash(category, items),
            "primary": "accuracy",
            "metrics": {m: (sum(v[m] for v in table.values()) / n if n else 0.0) for m in METRICS},
            "items": table,
            "finish": dict(Counter(r.score.kind or "valid" for r in results)),
            "completion_tokens": sum(r.completion_tokens for r in results)}


def evaluate_canaries(backend: Backend, sizes: dict[str, int], *, k: int,
                      params: SamplingParams | None = None, max_context_tokens: int = 8192,
                      version_tag: str = "v1", seed: int = 0) -> dict[str, dict]:
    """Every configured BFCL canary suite, k samples per item: suite name -> suite table."""
    params = params or params_for()
    out = {}
    for category, n in sizes.items():
        if n <= 0:
            continue
        items = canary_items(category, n, version_tag)
        play = play_multi_turn if category in MULTI_TURN else play_single_turn
        results = play(items, backend, k=k, seed=seed, params=params,
                       max_context_tokens=max_context_tokens)
        out[suite_name(category)] = score(category, items, results, k, version_tag)
    return out


@functools.lru_cache(maxsize=4)
def _protected(categories: tuple[str, ...]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for category in categories:
        for text in user_messages(category):
            seen.setdefault(text)
    return tuple(seen)


def protected_prompts(categories: tuple[str, ...] = CATEGORIES) -> list[str]:
    """Every user message of every item of `categories` (for decontamination), read from the
    question files only and kept per process: all 14 categories take about 0.5 s."""
    return list(_protected(tuple(categories)))
