"""BFCL's own checkers, scoring the project's rollouts: `ast_checker` for single-turn items,
`multi_turn_checker` (state and response checks) for multi-turn entries.

BFCL's `ast_checker` imports its model registry, which imports every API client. A stub
module stands in for `bfcl_eval.constants.model_config` (a defaultdict registry in which no
model turns "." into "_" in names), so nothing of the clients is needed or imported. The
multi-turn checker replays the model's call strings and the ground truth's on fresh
instances under a tag of its own, deleted afterwards.

A failed item names its failure kind: BFCL's own `error_type` (e.g. `instance_state_mismatch`,
`simple_function_checker:missing_required`), or `force_terminated` (fewer turns played than
the entry has), `irrelevance:called` or `checker_error` (the checker raised).
"""
from __future__ import annotations

import sys
import types
from collections import defaultdict
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from data.bfcl import MultiTurnEntry, new_tag, release
from data.loaders import BfclItem

MODEL_NAME = "toolsmith"  # the name BFCL's checkers see (the stub registry knows every name)


@dataclass(frozen=True)
class Score:
    valid: bool
    kind: str | None = None  # failure kind; None when valid
    detail: str = ""

    def to_dict(self) -> dict:
        return {"valid": self.valid, "kind": self.kind, "detail": self.detail}


def _stub_registry() -> None:
    """Put a registry stub where BFCL's checker looks for its model configs."""
    name = "bfcl_eval.constants.model_config"
    if name in sys.modules:
        return
    stub = types.ModuleType(name)
    stub.MODEL_CONFIG_MAPPING = defaultdict(lambda: SimpleNamespace(underscore_to_dot=False))
    sys.modules[name] = stub


def _ast_checker():
    _stub_registry()
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    return ast_checker


def _as_output(calls: list) -> list[dict]:
    """Parsed calls (`Call`s or {"name", "arguments"} dicts) -> BFCL's [{name: {arg: value}}]."""
    out = []
    for c in calls:
        name = c["name"] if isinstance(c, dict) else c.name
        args = c.get("arguments", {}) if isinstance(c, dict) else c.arguments
        out.append({name: args})
    return out


def score_single(item: BfclItem, calls: list) -> Score:
    """One single-turn answer (the calls of the first assistant turn) by BFCL's rules:
    irrelevance items pass when nothing was called, the others go to `ast_checker`."""
    if item.ground_truth is None:
        return Score(True) if not calls else Score(False, "irrelevance:called",
                                                   f"{len(calls)} call(s) made")
    from bfcl_eval.constants.enums import Language
    try:
        r = _ast_checker()(item.functions, _as_output(calls), item.ground_truth,
                           Language.PYTHON, item.category, MODEL_NAME)
    except Exception as err:  # the checker indexing a malformed answer: the answer fails
        return Score(False, "checker_error", f"{type(err).__name__}: {err}")
    if r["valid"]:
        return Score(True)
    return Score(False, r.get("error_type", "ast:unknown"), _short(r.get("error")))


def score_multi_turn(entry: MultiTurnEntry, decoded: list[list[list[str]]]) -> Score:
    """One multi-turn rollout: `decoded` holds, per user turn played, the call strings of each
    model step that made calls. A rollout that stopped early (forced after the step limit)
    has fewer turns than the entry and fails, as in BFCL's runner."""
    if len(decoded) != len(entry.ground_truth):
        return Score(False, "force_terminated",
                     f"{len(decoded)} of {len(entry.ground_truth)} turns played")
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker
    tag = new_tag()
    try:
        r = multi_turn_checker([[list(s) for s in turn] for turn in decoded],
                               entry.ground_truth, entry.checker_entry(), entry.category, tag)
    except Exception as err:
        return Score(False, "checker_error", f"{type(err).__name__}: {err}")
    finally:
        release(tag)
    if r.get("valid"):
        return Score(True)
    kind = str(r.get("error_type", "multi_turn:unknown")).removeprefix("multi_turn:")
    return Score(False, kind, _short(r.get("error_message")))


def _short(err: Any, n: int = 300) -> str:
    text = "; ".join(map(str, err)) if isinstance(err, list) else str(err or "")
    return text if len(text) <= n else text[:n] + "..."
