"""Task files: a round's tasks read from JSON Lines, beside or instead of the generators.

One row is one `Task`, in the form `tasks.jsonl` stores it (so a round's task file reads back
as a task file), with defaults for what a hand-written row leaves out:

  prompt / history  the user's request and earlier turns; or `messages` (OpenAI form): an
                    optional leading system message, the history, and the last user message
  tools             OpenAI-form declarations (a bare {"name", "parameters"} is wrapped);
                    default: the tools of `domain` when it names a known domain
  answer            required: a number, a string the final answer must contain, or null
                    when the right move is to call no tool
  gold_calls        acceptable first calls [{"name", "arguments"}], checked against `tools`
  id                default "<file stem>-<line>"; seed: derived from the id
  domain            default: the known domain implementing most of the declared tools,
                    else "custom"
  kind              default: "irrelevance" (answer null), "reasoning" (no tools),
                    "parallel" (several gold calls), else "single"
  system            default: the generators' system prompt
  min_calls         default: the number of gold calls to tools a known domain implements
                    (a call to any other tool can never succeed, so it cannot be demanded)
  faults, max_turns, difficulty, oracle, decline (answer null and the answer must say it
                    cannot: a request only a missing tool serves): as in `Task`; an oracle
                    must verify (plan first)

Tools no domain implements are fine: a call to one gets the environment's `not_found` error,
and the verifier still checks the answer. Every row is validated on load; an error names the
file, the line and the field.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

import jsonschema
from pydantic import ValidationError

from .chatformat import check_call, schemas_of
from .environment import BACKUP, tool_names
from .envs import DOMAINS
from .envs.base import stable_int
from .jsonl import DataError
from .tasks import SYSTEM
from .trajectory import Task
from .verify import verify

CUSTOM = "custom"
SHOWN = 10  # errors listed in one DataError


class RowError(ValueError):
    """What is wrong with one row, and in which field."""

    def __init__(self, field: str, message: str):
        super().__init__(f"field {field!r}: {message}")


def load_tasks(path: str | Path) -> list[Task]:
    """Every row of one task file as a Task. Raises DataError listing each bad row as
    `file:line: field 'x': what is wrong`."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: task file not found")
    out, errors, lines = [], [], {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            task = task_from_row(json.loads(line), path.stem, lineno)
        except json.JSONDecodeError as err:
            errors.append(f"{path}:{lineno}: not valid JSON ({err.msg} at column {err.colno})")
            continue
        except RowError as err:
            errors.append(f"{path}:{lineno}: {err}")
            continue
        if task.id in lines:
            errors.append(f"{path}:{lineno}: field 'id': {task.id!r} is already the id of "
                          f"line {lines[task.id]}")
            continue
        lines[task.id] = lineno
        out.append(task)
    if errors:
        more = f"\n... and {len(errors) - SHOWN} more" if len(errors) > SHOWN else ""
        raise DataError("\n".join(errors[:SHOWN]) + more)
    return out


def load_task_files(paths: Iterable[str | Path]) -> list[Task]:
    """The tasks of several files, in order; ids must be unique across them."""
    out, seen = [], {}
    for path in paths:
        for task in load_tasks(path):
            if task.id in seen:
                raise DataError(f"{path}: field 'id': {task.id!r} is also a task of "
                                f"{seen[task.id]}")
            seen[task.id] = path
            out.append(task)
    return out


def task_from_row(row: Any, stem: str, lineno: int) -> Task:
    """One row -> Task, defaults filled in (see the module docstring). Raises RowError."""
    if not isinstance(row, dict):
        raise RowError("row", "not a JSON object")
    row = dict(row)
    if "messages" in row:
        if "prompt" in row or "history" in row:
            raise RowError("messages", "give messages, or prompt and history, not both")
        row.update(_split(row.pop("messages"), has_system="system" in row))
    if "tools" not in row:
        if row.get("domain") not in DOMAINS:
            raise RowError("tools", "missing: declare the tools ([] for none) or name a known "
                                    f"domain ({', '.join(DOMAINS)})")
        row["tools"] = DOMAINS[row["domain"]].tools
    row["tools"] = _tools(row["tools"])
    _check_gold_calls(row.get("gold_calls", []), row["tools"])
    row.setdefault("id", f"{stem}-{lineno}")
    row.setdefault("seed", stable_int("taskfile", row["id"], mod=2**31 - 1))
    row.setdefault("domain", _domain_of(row["tools"]))
    row.setdefault("system", SYSTEM)
    gold = row.get("gold_calls") or []
    row.setdefault("min_calls", sum(implemented(c["name"]) for c in gold))
    if "kind" not in row:
        row["kind"] = ("irrelevance" if row.get("answer", "") is None else
                       "reasoning" if not row["tools"] else
                       "parallel" if len(gold) > 1 else "single")
    try:
        task = Task.model_validate(row)
    except ValidationError as err:
        first = err.errors()[0]
        raise RowError(".".join(str(p) for p in first["loc"]) or "row", first["msg"]) from None
    if task.oracle:
        v = verify(task, task.messages() + task.oracle, require_plan=True)
        if not v.success:
            raise RowError("oracle", "the demonstration does not verify: "
                                     + "; ".join(v.reasons))
    return task


def _split(messages: Any, has_system: bool) -> dict:
    """OpenAI-form messages -> system, history and prompt."""
    if not isinstance(messages, list) or not messages:
        raise RowError("messages", "must be a non-empty list of {role, content}")
    for i, m in enumerate(messages):
        if not (isinstance(m, dict) and m.get("role") in ("system", "user", "assistant", "tool")
                and isinstance(m.get("content"), str)):
            raise RowError(f"messages[{i}]", "needs a role (system, user, assistant or tool) "
                                             "and text content")
    out = {}
    if messages[0]["role"] == "system":
        if has_system:
            raise RowError("messages[0]", "a system message beside the 'system' field")
        out["system"] = messages[0]["content"]
        messages = messages[1:]
    if not messages or messages[-1]["role"] != "user":
        raise RowError("messages", "must end with the user's prompt (a user message)")
    out["prompt"] = messages[-1]["content"]
    out["history"] = [{"role": m["role"], "content": m["content"]} for m in messages[:-1]]
    return out


def _tools(raw: Any) -> list[dict]:
    """Declarations in OpenAI form, each with a name and a valid JSON schema."""
    if not isinstance(raw, list):
        raise RowError("tools", "must be a list of tool declarations")
    out, names = [], set()
    for i, t in enumerate(raw):
        fn = t.get("function", t) if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise RowError(f"tools[{i}]", "a tool declaration needs a 'name'")
        if fn["name"] in names:
            raise RowError(f"tools[{i}]", f"tool {fn['name']!r} is declared twice")
        names.add(fn["name"])
        params = fn.get("parameters", {"type": "object"})
        try:
            if not isinstance(params, dict):
                raise jsonschema.SchemaError("parameters is not an object")
            jsonschema.validators.validator_for(params).check_schema(params)
        except jsonschema.SchemaError as err:
            raise RowError(f"tools[{i}].parameters",
                           f"not a valid JSON schema: {err.message}") from None
        out.append({"type": "function", "function": fn})
    return out


def _check_gold_calls(calls: Any, tools: list[dict]) -> None:
    if not isinstance(calls, list):
        raise RowError("gold_calls", "must be a list of {name, arguments}")
    schemas = schemas_of(tools)
    for i, c in enumerate(calls):
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            raise RowError(f"gold_calls[{i}]", "needs a 'name' and 'arguments'")
        why = check_call(c["name"], c.get("arguments"), schemas)
        if why:
            raise RowError(f"gold_calls[{i}]", why)


def implemented(name: str) -> bool:
    """Whether a known domain implements tool `name` (a `_backup` twin included): what the
    environment can execute rather than answer `not_found`."""
    return any(name.removesuffix(BACKUP) in d.impl for d in DOMAINS.values())


def _domain_of(tools: list[dict]) -> str:
    """The known domain implementing most of the declared tools; "custom" when none does."""
    names = [n.removesuffix(BACKUP) for n in tool_names(tools)]
    score = {d.name: sum(n in d.impl for n in names) for d in DOMAINS.values()}
    best = max(score, key=score.get, default=None)
    return best if best is not None and score[best] else CUSTOM
