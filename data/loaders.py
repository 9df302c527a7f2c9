"""Loaders for external data: Hermes function-calling conversations, BFCL-style question /
possible-answer files, GSM8K-style math. Everything becomes the project's own records.

Sources are local files (JSON Lines, or one JSON array) or, where a network exists,
`hub:<dataset>[:<config>][@<split>]` read through `datasets`. Hermes rows become
`Trajectory`s (source "dataset") for training; BFCL and GSM8K rows become `Task`s for canary
suites. A row that cannot be converted (or a line that is not JSON) raises `DataError` naming
file:line and what is wrong, unless `skip_bad=True`, in which case it is left out and named in
`Loaded.skipped`: one bad row never costs the good ones.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .chatformat import CALL_CLOSE, CALL_OPEN, DEFAULT_SYSTEM, format_call, parse
from .envs.base import stable_int
from .jsonl import DataError
from .tasks import SYSTEM
from .trajectory import GoldCall, Task, Trajectory

HUB = "hub:"


@dataclass
class Loaded:
    items: list
    skipped: list[str] = field(default_factory=list)  # "file:line: reason" of rows left out
    origins: list[str] = field(default_factory=list)  # "file:line" each item came from


# ------------------------------------------------------------------------------ raw rows

def _hub_rows(source: str) -> Iterator[tuple[str, dict]]:
    spec = source[len(HUB):]
    spec, _, split = spec.partition("@")
    name, _, config = spec.partition(":")
    try:
        import datasets
        ds = datasets.load_dataset(name, config or None, split=split or "train")
    except Exception as err:  # no network, unknown name, ... : say what to do instead
        raise DataError(f"{source}: could not load from the hub ({type(err).__name__}: {err}); "
                        f"without a network, download the file elsewhere and pass its path") \
            from None
    for i, row in enumerate(ds):
        yield f"{source}#{i}", dict(row)


def rows(source: str | Path, limit: int | None = None,
         bad: list[str] | None = None) -> Iterator[tuple[str, dict]]:
    """(where, row) pairs from a JSONL file, a JSON array file, or `hub:` dataset. A line that
    is not JSON raises DataError, or, when a `bad` list is given, is named there and skipped."""
    it = (_hub_rows(str(source)) if str(source).startswith(HUB)
          else _file_rows(Path(source), bad))
    for n, pair in enumerate(it):
        if limit is not None and n >= limit:
            return
        yield pair


def _file_rows(path: Path, bad: list[str] | None = None) -> Iterator[tuple[str, dict]]:
    if not path.exists():
        raise DataError(f"{path}: file not found")

    def broken(msg: str) -> None:
        if bad is None:
            raise DataError(msg + "; fix or delete that line")
        bad.append(msg)

    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except ValueError as err:
            broken(f"{path}: not valid JSON ({getattr(err, 'msg', err)} at line "
                   f"{getattr(err, 'lineno', '?')})")
            return
        for i, row in enumerate(data):
            yield f"{path}[{i}]", row
        return
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as err:  # JSONDecodeError, or a number too long to convert
            broken(f"{path}:{lineno}: not valid JSON ({getattr(err, 'msg', err)} at column "
                   f"{getattr(err, 'colno', '?')})")
            continue
        yield f"{path}:{lineno}", row


def _convert_all(source, limit, convert, skip_bad: bool) -> Loaded:
    out = Loaded([])
    for where, row in rows(source, limit, out.skipped if skip_bad else None):
        try:
            if not isinstance(row, dict):
                raise ValueError("row is not a JSON object")
            out.items.append(convert(row, where))
            out.origins.append(where)
        except (ValueError, KeyError, TypeError, SyntaxError) as err:
            msg = f"{where}: {err if not isinstance(err, KeyError) else f'missing field {err}'}"
            if not skip_bad:
                raise DataError(msg + " (pass skip_bad=True to leave such rows out)") from None
            out.skipped.append(msg)
    return out


# --------------------------------------------------------------------------------- GSM8K

_FINAL = re.compile(r"####\s*(.+?)\s*$", re.S)
_CALC = re.compile(r"<<[^>]*>>")


def _gsm8k_task(row: dict, where: str) -> Task:
    question = row.get("question") or row.get("problem")
    if not isinstance(question, str) or not question.strip():
        raise ValueError("field 'question' is missing or empty")
    raw = row["answer"]
    if isinstance(raw, (int, float)):
        rationale, answer = "", float(raw)
    else:
        m = _FINAL.search(str(raw))
        if not m:
            raise ValueError("field 'answer' has no '#### <number>' final line")
        try:
            answer = float(m.group(1).replace(",", "").replace("$", ""))
        except ValueError:
            raise ValueError(f"final answer {m.group(1)!r} is not a number") from None
        rationale = _CALC.sub("", str(raw)[:m.start()]).strip()
    rid = str(row.get("id", where))
    shown = int(answer) if answer.is_integer() else answer
    think = f"<think>\n{rationale}\n</think>\n" if rationale else ""
    return Task(id=f"gsm8k-{stable_int(rid, question, mod=10**10)}", domain="math",
                kind="reasoning", seed=stable_int(rid, question), system=SYSTEM,
                prompt=question.strip(), tools=[], answer=answer, max_turns=3,
                oracle=[{"role": "assistant", "content": f"{think}The answer is {shown}."}])


def load_gsm8k(source: str | Path, limit: int | None = None, skip_bad: bool = False) -> Loaded:
    """GSM8K-style math: rows {"question", "answer": "... #### 72"} (or a number) -> Tasks."""
    return _convert_all(source, limit, _gsm8k_task, skip_bad)


# ---------------------------------------------------------------------------------- BFCL

BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None,
              "string": "string", "integer": "integer", "boolean": "boolean", "array": "array",
              "object": "object", "number": "number", "null": "null"}
BFCL_UNSUPPORTED = ("multi_turn", "java", "memory", "web_search", "format_sensitivity")


@dataclass
class BfclItem:
    id: str
    category: str
    messages: list[dict]            # the single turn's messages
    functions: list[dict]           # BFCL function docs, as given
    ground_truth: list[dict] | None  # [{name: {param: [accepted...]}}]; None: no call is right


def bfcl_category(path: str | Path, item_id: str = "") -> str:
    """`BFCL_v4_live_simple.json` -> `live_simple` (from the id when the name says nothing)."""
    m = re.match(r"BFCL_v\d+_(.+)\.jsonl?$", Path(str(path)).name)
    if m:
        return m.group(1)
    return re.sub(r"_\d+(-\d+)*$", "", item_id)


def _schema(spec: Any) -> Any:
    """BFCL parameter types -> JSON Schema (dict -> object, float -> number, tuple -> array)."""
    if not isinstance(spec, dict):
        return spec
    out = {k: v for k, v in spec.items() if k not in ("type", "properties", "items")}
    if "type" in spec:
        t = BFCL_TYPES.get(spec["type"], "string")
        if t is not None:
            out["type"] = t
    if isinstance(spec.get("properties"), dict):
        out["properties"] = {k: _schema(v) for k, v in spec["properties"].items()}
    if "items" in spec:
        out["items"] = _schema(spec["items"])
    return out


def bfcl_tools(functions: list[dict]) -> list[dict]:
    """BFCL function docs -> OpenAI-form tools with JSON-Schema types (names kept, dots too)."""
    return [{"type": "function", "function": {
        "name": f["name"], "description": f.get("description", ""),
        "parameters": _schema(f.get("parameters", {"type": "dict", "properties": {}}))}}
        for f in functions]


def load_bfcl(questions: str | Path, answers: str | Path | None = None,
              limit: int | None = None) -> list[BfclItem]:
    """A BFCL-style question file and, for call categories, its possible-answer file
    (matched by id). Irrelevance files have no answers. Without `answers`, BFCL's own layout
    is tried: `possible_answer/<same file name>` beside the question file."""
    qrows = list(rows(questions, limit))
    arows = {}
    if answers is None and not str(questions).startswith(HUB):
        sibling = Path(questions).parent / "possible_answer" / Path(questions).name
        answers = sibling if sibling.exists() else None
    if answers is not None:
        arows = {r.get("id"): r for _, r in rows(answers)}
    items = []
    for where, q in qrows:
        qid = str(q.get("id", ""))
        cat = bfcl_category(questions, qid)
        if any(u in cat for u in BFCL_UNSUPPORTED):
            raise DataError(f"{questions}: BFCL category {cat!r} is not single-turn AST; use "
                            f"simple/multiple/parallel/parallel_multiple, live_* or irrelevance")
        turns = q.get("question")
        if not isinstance(turns, list) or not turns or not isinstance(turns[0], list):
            raise DataError(f"{where}: field 'question' must be a list of turns (message lists)")
        if len(turns) != 1:
            raise DataError(f"{where}: {len(turns)} turns; only single-turn items are supported")
        if not isinstance(q.get("function"), list):
            raise DataError(f"{where}: field 'function' (the function docs) is missing")
        truth = None
        if "irrelevance" not in cat:
            if qid not in arows:
                raise DataError(f"{where}: no possible answer with id {qid!r}"
                                + ("" if answers else "; pass the possible_answer file"))
            truth = arows[qid].get("ground_truth")
            if not isinstance(truth, list) or not all(isinstance(g, dict) and len(g) == 1
                                                      for g in truth):
                raise DataError(f"{answers}: id {qid!r}: 'ground_truth' must be a list of "
                                f"{{function: {{param: [accepted values]}}}}")
        items.append(BfclItem(qid, cat, turns[0], q["function"], truth))
    return items


def bfcl_task(item: BfclItem, gold: list[tuple[str, dict]] = ()) -> Task:
    """A BFCL item as a single-turn Task (scored on its first assistant turn by the gate's
    AST checker). `gold` is one concrete correct answer for the oracle and `gold_calls`."""
    msgs = list(item.messages)
    system = SYSTEM
    if msgs and msgs[0].get("role") == "system":
        system = msgs.pop(0)["content"]
    last_user = max((i for i, m in enumerate(msgs) if m.get("role") == "user"), default=None)
    if last_user is None:
        raise DataError(f"BFCL item {item.id}: no user message")
    kind = ("irrelevance" if item.ground_truth is None
            else "parallel" if len(item.ground_truth) > 1 else "single")
    calls = list(gold)
    oracle = ([{"role": "assistant", "content": "\n".join(format_call(n, a) for n, a in calls)}]
              if calls else [{"role": "assistant",
                              "content": "None of the available tools can do that."}])
    return Task(id=f"bfcl-{item.id}", domain="bfcl", kind=kind, seed=stable_int("bfcl", item.id),
                system=system, prompt=msgs[last_user]["content"],
                history=[{"role": m["role"], "content": m.get("content", "")}
                         for m in msgs[:last_user]],
                tools=bfcl_tools(item.functions), answer=None if kind == "irrelevance" else "",
                gold_calls=[GoldCall(name=n, arguments=a) for n, a in calls],
                min_calls=0, max_turns=1, oracle=oracle)


# -------------------------------------------------------------------------------- Hermes

_ROLE = {"system": "system", "human": "user", "user": "user", "gpt": "assistant",
         "assistant": "assistant", "tool": "tool", "function": "tool", "observation": "tool"}
_BLOCK = re.compile(re.escape(CALL_OPEN) + r"\s*(.*?)\s*" + re.escape(CALL_CLOSE), re.S)
_RESPONSE = re.compile(r"<tool_response>\s*(.*?)\s*</tool_response>", re.S)
_TOOLS = re.compile(r"<tools>\s*(.*?)\s*</tools>", re.S)


def _literal(text: str) -> Any:
    """JSON, or a Python literal (Hermes examples quote dicts the Python way)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return ast.literal_eval(text)


def _as_tools(raw: Any) -> list[dict]:
    if isinstance(raw, str):
        raw = _literal(raw) if raw.strip() else []
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list):
        raise ValueError("'tools' is not a list of function declarations")
    out = []
    for t in raw:
        fn = t.get("function", t) if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise ValueError("a tool declaration lacks a 'name'")
        out.append({"type": "function", "function": fn})
    return out


def _canonical_calls(text: str) -> tuple[str, int]:
    """Rewrite every <tool_call> block in the canonical JSON form; returns (text, n calls).
    A block that is not a call (bad JSON, no name) stays as written, for `parse` to name."""
    n = 0

    def one(m: re.Match) -> str:
        nonlocal n
        n += 1
        try:
            obj = _literal(m.group(1))
            args = obj.get("arguments", {}) if isinstance(obj, dict) else None
            args = _literal(args) if isinstance(args, str) else args
        except (ValueError, SyntaxError, TypeError):
            return m.group(0)
        if args is None or not isinstance(obj.get("name"), str):
            return m.group(0)
        return format_call(obj["name"], args)
    return _BLOCK.sub(one, text).strip(), n


def _hermes_trajectory(row: dict, where: str) -> Trajectory:
    turns = row.get("conversations") or row.get("messages")
    if not isinstance(turns, list) or not turns:
        raise ValueError("no 'conversations' (Hermes) or 'messages' (OpenAI form) list")
    tools = _as_tools(row["tools"]) if row.get("tools") else []
    messages: list[dict] = []
    call_turns, max_calls, errors = 0, 0, []
    for i, t in enumerate(turns):
        if not isinstance(t, dict):
            raise ValueError(f"turn {i} is not an object")
        role = _ROLE.get(t.get("from", t.get("role")))
        content = t.get("value", t.get("content")) or ""
        if role is None:
            raise ValueError(f"unknown speaker {t.get('from', t.get('role'))!r}")
        if not isinstance(content, str):
            raise ValueError(f"turn {i}: the content is not text")
        if role == "system":
            found = [b for b in _TOOLS.findall(content) if b.strip()]  # skips "<tools></tools>"
            if found and not tools:
                tools = _as_tools(found[-1])
            # the template writes the tool list itself: keep only a system prompt without it
            messages.append({"role": "system",
                             "content": DEFAULT_SYSTEM if found else content.strip()})
        elif role == "assistant":
            for call in t.get("tool_calls") or []:  # OpenAI form: calls beside the content
                fn = call.get("function", call) if isinstance(call, dict) else None
                if not isinstance(fn, dict):
                    raise ValueError(f"turn {i}: a tool call is not an object")
                args = fn.get("arguments", {})
                content += ("\n" if content else "") + format_call(
                    fn["name"], _literal(args) if isinstance(args, str) else args)
            content, n = _canonical_calls(content)
            call_turns += n > 0
            max_calls = max(max_calls, n)
            errors += parse(content, tools).errors
            messages.append({"role": "assistant", "content": content})
        elif role == "tool":
            bodies = _RESPONSE.findall(content) or [content.strip()]
            messages += [{"role": "tool", "content": b} for b in bodies]
        else:
            messages.append({"role": "user", "content": content})
    if messages[0]["role"] != "system":
        messages.insert(0, {"role": "system", "content": DEFAULT_SYSTEM})
    if not any(m["role"] == "assistant" for m in messages):
        raise ValueError("the conversation has no assistant turn")
    rid = str(row.get("id", where))
    kind = ("irrelevance" if call_turns == 0 else "parallel" if max_calls > 1
            else "chained" if call_turns > 1 else "single")
    last = messages[-1]
    finish = "answer" if last["role"] == "assistant" and CALL_OPEN not in last["content"] \
        else "pending"
    return Trajectory(id=f"hermes-{rid}", task_id=f"hermes-{rid}",
                      domain=str(row.get("category") or "hermes"), kind=kind,
                      seed=stable_int("hermes", rid), source="dataset", messages=messages,
                      tools=tools, finish=finish, parse_errors=errors,
                      turns=sum(m["role"] == "assistant" for m in messages))


def load_hermes(source: str | Path, limit: int | None = None, skip_bad: bool = False) -> Loaded:
    """Hermes / ShareGPT function-calling conversations ({"conversations": [{"from",
    "value"}], "tools"}) or OpenAI-form rows ({"messages": [...], "tools": [...]}) ->
    Trajectories.

    Calls are rewritten in the canonical `<tool_call>` JSON form, tool responses unwrapped
    (the template wraps them again), the tool list moves out of the system prompt. Calls that
    do not match the declared tools are kept and listed in `parse_errors`; whether a row may
    train is `data.teacher`'s decision, not the loader's.
    """
    return _convert_all(source, limit, _hermes_trajectory, skip_bad)
