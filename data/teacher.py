"""Teacher traces from a file: every row checked before it can train, none lost silently.

Rows come from `load_hermes` (Hermes / ShareGPT `conversations`, or OpenAI `messages`). The
source's `verify` mode says what a row must pass:

  trust    well-formed turns: a user opens, every assistant turn passes the turn rule
           (`data.turns.advance`: its calls parse, at most the allowed number per turn, within
           the turn limit), each call is answered by one tool result, a final answer ends
           the row. Kept as it stands; the stats say trusted, not verified.
  schema   that, and every call names a declared tool with arguments valid against its schema.
  execute  that, and every call re-executed: in the environment of the round's task whose
           prompt equals the row's first user prompt, else in the built-in (or configured)
           domains that implement the called tools. A recorded result must agree with the
           real one, which replaces it (with `ok` set); a task's row must then pass
           `data.verify.verify`. A row with neither a task nor calls the domains implement
           cannot be re-executed and is dropped with that reason.

A kept row is labelled `source: "teacher"` and carries a successful `Verification` whose
reasons and checks name the mode that vouched for it. A row that fails is never raised: it is
counted by reason and named by file and line.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .chatformat import parse
from .environment import DomainEnvironment, Environment
from .loaders import load_hermes
from .taskfile import implemented
from .trajectory import Task, Trajectory, Verification
from .turns import Conversation, advance
from .verify import has_loop, replay, verify

MODES = ("execute", "schema", "trust")
KEPT_AS = {"execute": "re-executed and verified", "schema": "schema-checked, not executed",
           "trust": "trusted, not verified"}
# `execute` on a row no round task has the prompt of: its calls re-ran, its answer did not
UNCHECKED = "re-executed, answer unchecked (no round task has its prompt)"
MAX_TURNS = Task.model_fields["max_turns"].default  # per user turn, for rows without a task
EXAMPLES = 20  # dropped rows named in the stats (all of them go to the round's drop list)


class Dropped(Exception):
    """Why one row may not train: a short reason to count, and the detail."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


@dataclass
class TeacherTraces:
    source: str
    mode: str
    kept: list[Trajectory] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)  # (reason, "file:line: ...")

    def stats(self) -> dict:
        """Read, kept and dropped counts, what vouched for the kept rows (`execute`: how many
        kept an answer nothing checked), drops by reason, and the first dropped rows."""
        unchecked = sum(answer_unchecked(t) for t in self.kept)
        kept_as = KEPT_AS[self.mode]
        if unchecked:
            kept_as = (f"{len(self.kept) - unchecked} {kept_as}, {unchecked} {UNCHECKED}"
                       if unchecked < len(self.kept) else UNCHECKED)
        return {"file": self.source, "verify": self.mode, "kept_as": kept_as,
                "answer_unchecked": unchecked,
                "read": len(self.kept) + len(self.dropped), "kept": len(self.kept),
                "dropped": len(self.dropped), "why": dict(Counter(r for r, _ in self.dropped)),
                "rows": [line for _, line in self.dropped[:EXAMPLES]]}


def answer_unchecked(traj: Trajectory) -> bool:
    """A kept row whose final answer no check vouched for (`execute` without a task)."""
    return traj.verification is not None and traj.verification.checks.get(
        "answer_checked") is False


def load_teacher(source: str | Path, mode: str = "schema", tasks: Iterable[Task] = (),
                 round_no: int = 0, require_plan: bool = False) -> TeacherTraces:
    """Every row of `source` checked as `mode` says; `tasks` are the round's (a row whose first
    user prompt equals a task's prompt is re-executed and verified against that task)."""
    if mode not in MODES:
        raise ValueError(f"teacher verify mode {mode!r}; choose from {', '.join(MODES)}")
    loaded = load_hermes(source, skip_bad=True)
    out = TeacherTraces(str(source), mode)
    out.dropped += [("unreadable row", line) for line in loaded.skipped]
    by_prompt = {t.prompt.strip(): t for t in tasks}
    for traj, where in zip(loaded.items, loaded.origins):
        try:
            out.kept.append(check(traj, mode, by_prompt, round_no, require_plan))
        except Dropped as why:
            out.dropped.append((why.reason, f"{where}: {why}"))
    return out


def check(traj: Trajectory, mode: str, by_prompt: dict[str, Task], round_no: int = 0,
          require_plan: bool = False) -> Trajectory:
    """The row as it may train (re-executed results in `execute`), or raises Dropped."""
    task = by_prompt.get(_first_user(traj.messages)) if mode == "execute" else None
    tools = task.tools if task else traj.tools
    max_turns = task.max_turns if task else MAX_TURNS
    rule_tools = _any_arguments(traj.messages) if mode == "trust" else tools
    conv, pairs = _replay(traj.messages, rule_tools, None, max_turns)  # no env: no pairs
    if mode == "execute":  # well-formed and schema-valid: now play it for real
        conv, pairs = _replay(traj.messages, tools, _environment(traj, task), max_turns)
        for n, (call, recorded, real) in enumerate(pairs, 1):
            if not _agrees(recorded.get("content"), real):
                raise Dropped("result contradicts the environment",
                              f"call {n} ({call.name}) recorded {_short(recorded.get('content'))}, "
                              f"the environment returns {_short(real['content'])}")
    v = _vouch(mode, task, conv, len(pairs), require_plan)
    update = dict(source="teacher", round=round_no, messages=conv.messages, tools=tools,
                  finish="answer", verification=v,
                  turns=sum(m["role"] == "assistant" for m in conv.messages))
    if mode != "trust":
        update["parse_errors"] = []
    if task:
        update.update(task_id=task.id, domain=task.domain, kind=task.kind)
    return traj.model_copy(update=update)


def _vouch(mode: str, task: Task | None, conv: Conversation, executed: int,
           require_plan: bool) -> Verification:
    """The Verification a kept row carries: which mode vouched for it, and with what checks."""
    if mode == "execute" and task:
        v = verify(task, conv.messages, require_plan=require_plan, finish=conv.finish)
        if not v.success:
            raise Dropped("failed verification", f"task {task.id}: " + "; ".join(v.reasons))
        return v.model_copy(update={
            "checks": {**v.checks, "executed": True, "results_agree": True},
            "reasons": [f"teacher trace (verify: execute): {executed} call(s) re-executed in "
                        f"task {task.id}'s environment, results agree, answer verified"]})
    if mode == "execute":
        calls = replay(conv.messages, conv.tools).calls
        if has_loop(calls):
            raise Dropped("failed verification", "repeated a failing or identical call (loop)")
        return Verification(score=1.0, success=True, checks={
            "executed": True, "results_agree": True, "valid_calls": True, "no_loop": True,
            "answer_checked": False},
            reasons=[f"teacher trace (verify: execute): {executed} call(s) re-executed in the "
                     "built-in domains, results agree; no task, so the answer is unchecked"])
    if mode == "schema":
        return Verification(score=1.0, success=True, checks={
            "well_formed": True, "declared_tools": True, "schema_valid": True},
            reasons=["teacher trace (verify: schema): declared tools, schema-valid arguments, "
                     "well-formed turns; not executed"])
    return Verification(score=1.0, success=True, checks={"well_formed": True},
                        reasons=["teacher trace (verify: trust): well-formed turns, trusted "
                                 "as recorded; not verified"])


def _replay(messages: list[dict], tools: list[dict], env: Environment | None,
            max_turns: int) -> tuple[Conversation, list[tuple[Any, dict, dict]]]:
    """Play the row's assistant turns through the turn rule against `tools`. Tool results are
    the row's own, or with `env` the environment's; returns the conversation and
    (call, recorded, real) per executed call."""
    first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
    opening = messages[:first]
    roles = [m["role"] for m in opening]
    if "user" not in roles or roles[-1] != "user" or any(
            r not in ("system", "user") or (r == "system" and i) for i, r in enumerate(roles)):
        raise Dropped("malformed turns", "the row must open with an optional system message "
                                         f"and the user's prompt (found {roles})")
    conv = Conversation(list(opening), tools, max_turns=max_turns)
    pairs, i = [], first
    while i < len(messages):
        m, said = messages[i], sum(x["role"] == "assistant" for x in messages[:i])
        where = f"assistant turn {said + 1}" if m["role"] == "assistant" else \
            f"after assistant turn {said}"
        if conv.finish == "turn_limit":
            raise Dropped("over the turn limit", f"{where}: the turn rule ends a conversation "
                                                 f"after {max_turns} assistant turns")
        expected = "user" if conv.finish == "answer" else "assistant"
        if m["role"] != expected:
            what = ("a tool result no call asked for" if m["role"] == "tool"
                    else f"a {m['role']} turn")
            raise Dropped("malformed turns", f"{where}: {what}; the {expected} speaks next")
        if expected == "user":
            conv.user(m["content"])
            i += 1
            continue
        step = advance(conv, m["content"])
        if step.finish == "parse_error":
            raise Dropped(_call_reason(step.errors[0]), f"{where}: " + "; ".join(step.errors))
        conv.messages.append({"role": "assistant", "content": m["content"]})
        conv.turns, conv.finish = conv.turns + 1, step.finish
        recorded = messages[i + 1:i + 1 + len(step.calls)]
        if len(recorded) < len(step.calls) or any(r["role"] != "tool" for r in recorded):
            raise Dropped("malformed turns", f"{where}: {len(step.calls)} call(s) but "
                          f"{sum(r['role'] == 'tool' for r in recorded)} tool result(s) follow")
        for call, rec in zip(step.calls, recorded):
            if env is None:
                conv.messages.append(rec)
            else:
                real = env.execute(call).message(call)
                conv.messages.append(real)
                pairs.append((call, rec, real))
        conv.calls += len(step.calls)
        i += 1 + len(step.calls)
    if conv.finish != "answer":
        raise Dropped("no final answer", "the row ends " + (
            "on the turn limit" if conv.finish == "turn_limit" else "without an answer turn"))
    if not parse(conv.messages[-1]["content"]).text:
        raise Dropped("no final answer", "the last assistant turn says nothing")
    return conv, pairs


def _call_reason(error: str) -> str:
    """A parse error of the turn rule, as a reason to count."""
    if error.startswith("unknown tool"):
        return "undeclared tool"
    if error.startswith(("invalid arguments", "arguments of")):
        return "schema-invalid arguments"
    if "calls in one turn" in error:
        return "too many calls in one turn"
    return "malformed assistant turn"


def _called(messages: list[dict]) -> set[str]:
    return {c.name for m in messages if m["role"] == "assistant"
            for c in parse(m.get("content") or "").calls}


def _any_arguments(messages: list[dict]) -> list[dict]:
    """`trust`: every name the row calls, declared with a schema that takes any arguments,
    so the turn rule checks the calls' syntax only."""
    return [{"type": "function", "function": {"name": n, "parameters": {}}}
            for n in sorted(_called(messages))]


def _first_user(messages: list[dict]) -> str:
    return next((m["content"].strip() for m in messages if m["role"] == "user"), "")


def _environment(traj: Trajectory, task: Task | None) -> DomainEnvironment:
    """The task's environment, else the known domains' implementations of the row's tools.
    Dropped when a called tool has no implementation (its results cannot be reproduced) or,
    without a task, the row calls nothing (there is nothing to re-execute or verify)."""
    called = _called(traj.messages)
    missing = sorted(n for n in called if not implemented(n))
    if missing:
        raise Dropped("cannot re-execute", f"no known domain implements {', '.join(missing)}")
    if task:
        return DomainEnvironment.for_task(task)
    if not called:
        raise Dropped("cannot re-execute", "no task has this prompt and the row calls no tool")
    return DomainEnvironment(traj.tools)


def _json(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text.strip()


def _agrees(recorded: Any, real: dict) -> bool:
    """Whether a recorded tool result says what the environment says: the same value (JSON
    compared, numbers to 1e-6, a Hermes {"name", "content"} envelope unwrapped), or an error
    where the environment's call fails."""
    got = _json(recorded)
    if isinstance(got, dict) and set(got) == {"name", "content"}:
        got = _json(got["content"])
    if not real["ok"]:
        return (isinstance(got, dict) and "error" in got) or (
            isinstance(got, str) and "error" in got.lower())
    return _same(got, _json(real["content"]))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _short(text: Any, n: int = 80) -> str:
    s = text if isinstance(text, str) else json.dumps(text)
    return repr(s if len(s) <= n else s[:n] + "...")
