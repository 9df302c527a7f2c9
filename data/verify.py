"""The verifier: one function scores a trajectory for filters, gates and GRPO rewards alike.

`verify(task, messages)` replays nothing: it reads the assistant turns and tool results in
the trajectory, so a stored rollout can be re-scored at any time. Every check has a weight;
the score is the weighted share of passed checks, and success means every check passed.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .chatformat import Call, parse, schemas_of
from .trajectory import Task, Verification

WEIGHTS = {"answer": 0.5, "valid_calls": 0.2, "no_loop": 0.1, "within_limits": 0.1,
           "plan": 0.1}
_NUM = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")
# a declined request says so: a no-call answer to a request only a missing tool could serve
# (Task.decline) that says none of this states a made-up result (24 of the base model's answers
# to round 1's 64 mismatch tasks, e.g. "the cheapest fare from DUB to SYD was approximately
# $5.05", had passed as right abstentions and been trained on)
DECLINES = re.compile(r"\b(cannot|can't|can not|unable|not able|none of the|no (?:available |"
                      r"offered |suitable |such )?tools?\b|(?:don't|do not) have|not available|"
                      r"isn't available|not possible)", re.I)


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s.-]", " ", str(text).lower())).strip()


def numbers_in(text: str) -> list[float]:
    return [float(m.replace(",", "")) for m in _NUM.findall(text)]


def answer_matches(final: str, gold) -> bool:
    """Numbers: the last number in the final text equals the gold within 0.5% (or 0.01).
    Strings: the normalised gold occurs in the normalised final text."""
    if gold is None:
        return bool(final.strip())
    if isinstance(gold, (int, float)):
        nums = numbers_in(final)
        return bool(nums) and math.isclose(nums[-1], float(gold), rel_tol=5e-3, abs_tol=0.011)
    return normalise(gold) in normalise(final)


@dataclass
class Replay:
    """What the assistant did, read back from the messages."""
    calls: list[tuple[Call, bool]]      # every call and whether it succeeded: the tool
                                        # message's `ok` (set by the environment; rows from
                                        # outside without it count as succeeded)
    parse_errors: list[str]
    final: str | None                   # text of the last assistant turn, when it made no call
    plan_first: bool                    # a <think> plan came before the first call
    assistant_turns: int


def replay(messages: list[dict], tools: list[dict]) -> Replay:
    calls, errors, final, plan_first, turns = [], [], None, False, 0
    pending: list[Call] = []
    seen_call = False
    schemas = schemas_of(tools or [])
    for msg in messages:
        if msg["role"] == "assistant":
            turns += 1
            turn = parse(msg.get("content") or "", schemas=schemas)
            errors += turn.errors
            if turn.calls and not seen_call:
                plan_first, seen_call = turn.think_before_call, True
            pending = list(turn.calls)
            final = turn.text if not turn.calls and not turn.errors else None
        elif msg["role"] == "tool" and pending:
            call = pending.pop(0)
            calls.append((call, bool(msg.get("ok", True))))
    return Replay(calls, errors, final, plan_first, turns)


def has_loop(calls: list[tuple[Call, bool]]) -> bool:
    """A loop: repeating a call that already failed, or the same call three times."""
    failed, counts = set(), {}
    for call, ok in calls:
        key = call.key()
        if key in failed:
            return True
        counts[key] = counts.get(key, 0) + 1
        if counts[key] >= 3:
            return True
        if not ok:
            failed.add(key)
    return False


def verify(task: Task, messages: list[dict], require_plan: bool = False,
           finish: str = "answer") -> Verification:
    """Score the assistant's part of `messages` (everything after the task's prompt)."""
    r = replay(messages, task.tools)
    reasons, checks = [], {}
    succeeded = sum(ok for _, ok in r.calls)
    if finish != "answer" or r.final is None:
        checks["answer"] = False
        reasons.append(f"no final answer (ended by {finish})")
    elif task.answer is None and r.calls:
        checks["answer"] = False
        reasons.append("called a tool where none fits")
    elif task.decline and not DECLINES.search(r.final):
        checks["answer"] = False
        reasons.append(f"answered {r.final[:60]!r} where no offered tool serves the request "
                       "(a made-up answer): it should say it cannot")
    elif succeeded < task.min_calls:
        checks["answer"] = False
        reasons.append(f"{succeeded} successful calls, the task needs {task.min_calls}")
    else:
        checks["answer"] = answer_matches(r.final, task.answer)
        if not checks["answer"]:
            reasons.append(f"final answer {r.final[:80]!r} does not match {task.answer!r}")
    checks["valid_calls"] = not r.parse_errors
    reasons += [f"invalid call: {e}" for e in r.parse_errors]
    checks["no_loop"] = not has_loop(r.calls)
    if not checks["no_loop"]:
        reasons.append("repeated a failing or identical call (loop)")
    checks["within_limits"] = r.assistant_turns <= task.max_turns
    if not checks["within_limits"]:
        reasons.append(f"{r.assistant_turns} turns, limit {task.max_turns}")
    checks["plan"] = (not require_plan) or (not r.calls) or r.plan_first
    if not checks["plan"]:
        reasons.append("no <think> plan before the first call")
    score = sum(WEIGHTS[k] for k, ok in checks.items() if ok)
    return Verification(score=round(score, 6), success=all(checks.values()), reasons=reasons,
                        checks=checks)


def first_call_metrics(task: Task, messages: list[dict]) -> dict[str, float]:
    """Single-turn metrics of the first call against the gold calls: exact, args, name, has_call."""
    first = next((parse(m.get("content") or "", None) for m in messages
                  if m["role"] == "assistant"), None)
    call = first.calls[0] if first and first.calls else None
    if not task.gold_calls:  # irrelevance: the right first move is no call
        ok = float(call is None)
        return {"exact": ok, "args": ok, "name": ok, "has_call": float(call is not None)}
    if call is None:
        return {"exact": 0.0, "args": 0.0, "name": 0.0, "has_call": 0.0}
    name = any(g.name == call.name for g in task.gold_calls)
    args = any(_same_args(g.arguments, call.arguments) for g in task.gold_calls)
    exact = any(g.name == call.name and _same_args(g.arguments, call.arguments)
                for g in task.gold_calls)
    return {"exact": float(exact), "args": float(args), "name": float(name), "has_call": 1.0}


def _same_args(a: dict, b: dict) -> bool:
    if set(a) != set(b):
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, (int, float)) and isinstance(y, (int, float)):
            if not math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9):
                return False
        elif normalise(str(x)) != normalise(str(y)):
            return False
    return True


def reward(task: Task, messages: list[dict], **kw) -> float:
    """The GRPO reward is the verifier's score: training and gating cannot drift apart."""
    return verify(task, messages, **kw).score


def validate(tasks) -> list[str]:
    """Every oracle demonstration must score 1.0; returns the failures (empty when sound)."""
    bad = []
    for t in tasks:
        v = verify(t, t.oracle, require_plan=True)
        if not v.success or v.score != 1.0:
            bad.append(f"{t.id}: {v.reasons}")
    return bad
