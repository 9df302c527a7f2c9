"""ChatML + Hermes tool format: render conversations and parse model output.

The render is byte-identical to the Qwen2.5 tools template shipped in `chat_template.jinja`
(tested against `tokenizer.apply_chat_template`), so what the sampler sees, what the trainer
sees and what the exported GGUF's template produces are one string.

Assistant messages carry the raw text the model generated (plan, calls and answer together);
`tool_calls` is only rendered when `content` holds no `<tool_call>` markup (oracle and
external data), in the same canonical form `format_call` writes.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

TEMPLATE_PATH = Path(__file__).with_name("chat_template.jinja")
DEFAULT_SYSTEM = "You are a helpful assistant."
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"

TOOLS_PREAMBLE = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_POSTAMBLE = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments"
    " within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>,"
    " \"arguments\": <args-json-object>}\n</tool_call>"
)


def chat_template() -> str:
    """The project's Jinja chat template (Qwen2.5 tools rules, neutral default system)."""
    return TEMPLATE_PATH.read_text()


def to_json(obj: Any) -> str:
    """JSON the way transformers' `tojson` writes it: key order kept, `", "` / `": "`."""
    return json.dumps(obj, ensure_ascii=False)


def format_call(name: str, arguments: dict) -> str:
    """One canonical `<tool_call>` block."""
    return f"{CALL_OPEN}\n{to_json({'name': name, 'arguments': arguments})}\n{CALL_CLOSE}"


def system_text(system: str | None, tools: list[dict] | None) -> str:
    """Content of the system turn: the system prompt, then the tool list if any."""
    text = system if system is not None else DEFAULT_SYSTEM
    if not tools:
        return text
    return text + TOOLS_PREAMBLE + "".join("\n" + to_json(t) for t in tools) + TOOLS_POSTAMBLE


def _assistant_body(msg: dict) -> str:
    content = msg.get("content") or ""
    calls = msg.get("tool_calls") or []
    if not calls or CALL_OPEN in content:
        return "\n" + content
    body = ("\n" + content) if content else ""
    for call in calls:
        fn = call.get("function", call)
        body += "\n" + format_call(fn["name"], fn.get("arguments", {}))
    return body


def render(messages: list[dict], tools: list[dict] | None = None,
           add_generation_prompt: bool = False) -> str:
    """Render a conversation as the template does (tool results merged into one user turn)."""
    out = []
    if messages and messages[0]["role"] == "system":
        out.append(f"{IM_START}system\n{system_text(messages[0]['content'], tools)}{IM_END}\n")
        rest = messages[1:]
    else:
        out.append(f"{IM_START}system\n{system_text(None, tools)}{IM_END}\n")
        rest = messages
    for i, msg in enumerate(rest):
        role = msg["role"]
        if role == "assistant":
            out.append(f"{IM_START}assistant{_assistant_body(msg)}{IM_END}\n")
        elif role == "tool":
            if i == 0 or rest[i - 1]["role"] != "tool":
                out.append(f"{IM_START}user")
            out.append(f"\n<tool_response>\n{msg['content']}\n</tool_response>")
            if i == len(rest) - 1 or rest[i + 1]["role"] != "tool":
                out.append(f"{IM_END}\n")
        else:
            out.append(f"{IM_START}{role}\n{msg['content']}{IM_END}\n")
    if add_generation_prompt:
        out.append(f"{IM_START}assistant\n")
    return "".join(out)


# ---------------------------------------------------------------------------------- parsing

@dataclass
class Call:
    name: str
    arguments: dict

    def key(self) -> str:
        """Identity of a call for loop detection and dedup."""
        return self.name + json.dumps(self.arguments, sort_keys=True)


@dataclass
class ParsedTurn:
    """What one assistant turn said: plan, calls, visible text, and what was wrong with it."""
    think: str | None = None
    calls: list[Call] = field(default_factory=list)
    text: str = ""
    errors: list[str] = field(default_factory=list)
    think_before_call: bool = False

    @property
    def ok(self) -> bool:
        return not self.errors


def _spans(text: str, open_tag: str, close_tag: str) -> list[tuple[int, int]]:
    """(start, end) of each `open_tag ... close_tag` block, left to right, the first close
    after each open (what a lazy regex finds), in one pass: an open tag with no close after
    it ends the search, so unclosed tags cost linear time, not a rescan per tag."""
    out, pos = [], 0
    while True:
        i = text.find(open_tag, pos)
        if i < 0:
            return out
        j = text.find(close_tag, i + len(open_tag))
        if j < 0:
            return out
        pos = j + len(close_tag)
        out.append((i, pos))


def _inner(text: str, spans: list[tuple[int, int]], open_tag: str, close_tag: str) -> list[str]:
    return [text[i + len(open_tag):j - len(close_tag)] for i, j in spans]


def _without(text: str, spans: list[tuple[int, int]]) -> str:
    keep, pos = [], 0
    for i, j in spans:
        keep.append(text[pos:i])
        pos = j
    return "".join(keep) + text[pos:]


def _schemas(tools: list[dict] | None) -> dict[str, dict]:
    out = {}
    for t in tools or []:
        fn = t.get("function", t)
        out[fn["name"]] = fn.get("parameters", {"type": "object"})
    return out


_VALIDATORS: dict[str, Any] = {}


_BY_ID: dict[int, tuple[dict, Any]] = {}
_CHECKED: dict[tuple[int, str], str | None] = {}


def _validator(schema: dict):
    """A compiled validator per distinct schema: the schema is checked once, not per call.

    Looked up by object identity first (the same tool list is checked thousands of times),
    then by content."""
    hit = _BY_ID.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    key = json.dumps(schema, sort_keys=True)
    v = _VALIDATORS.get(key)
    if v is None:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        v = _VALIDATORS[key] = cls(schema)
    if len(_BY_ID) > 100_000:
        _BY_ID.clear()
    _BY_ID[id(schema)] = (schema, v)
    return v


def check_call(name: str, arguments: Any, schemas: dict[str, dict]) -> str | None:
    """Reason a call is invalid against the declared tools, or None when it is valid."""
    if name not in schemas:
        return f"unknown tool {name!r}"
    if not isinstance(arguments, dict):
        return f"arguments of {name} are not an object"
    try:
        validator = _validator(schemas[name])
    except jsonschema.SchemaError as err:  # a broken tool declaration is the data's fault
        return f"tool {name} has an invalid schema: {err.message}"
    try:  # pure function of (schema, arguments): k samples of a task repeat the same calls
        key = (id(validator), json.dumps(arguments, sort_keys=True))
    except (TypeError, ValueError):
        key = None
    if key is not None and key in _CHECKED:
        return _CHECKED[key]
    reason = None
    if not validator.is_valid(arguments):
        err = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
        where = "/".join(str(p) for p in err.absolute_path) or "arguments"
        reason = f"invalid arguments for {name} at {where}: {err.message}"
    if key is not None:
        if len(_CHECKED) > 200_000:
            _CHECKED.clear()
        _CHECKED[key] = reason
    return reason


def schemas_of(tools: list[dict] | None) -> dict[str, dict] | None:
    """Tool name -> parameter schema; pass to `parse(schemas=...)` when parsing many turns."""
    return _schemas(tools) if tools is not None else None


def parse(text: str, tools: list[dict] | None = None, *,
          schemas: dict[str, dict] | None = None) -> ParsedTurn:
    """Parse one assistant turn. Never raises: every problem becomes an entry in `errors`.

    With `tools` (or precomputed `schemas`) given, calls are checked against the declared
    names and JSON schemas.
    """
    turn = ParsedTurn()
    if not isinstance(text, str):
        turn.errors.append("output is not text")
        return turn
    if "<" not in text:  # plain answer: nothing to parse
        turn.text = text.strip()
        return turn
    think_spans = _spans(text, THINK_OPEN, THINK_CLOSE)
    thinks = _inner(text, think_spans, THINK_OPEN, THINK_CLOSE)
    if thinks:
        turn.think = "\n".join(t.strip() for t in thinks)
    elif THINK_OPEN in text:
        turn.errors.append("unclosed <think> tag")
    if schemas is None and tools is not None:
        schemas = _schemas(tools)
    call_spans = _spans(text, CALL_OPEN, CALL_CLOSE)
    for raw in _inner(text, call_spans, CALL_OPEN, CALL_CLOSE):
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError) as err:  # ValueError: also a number too long
            turn.errors.append(f"malformed JSON in <tool_call>: {err}")
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            turn.errors.append("<tool_call> JSON lacks a string 'name'")
            continue
        args = obj.get("arguments", {})
        if isinstance(args, str):  # OpenAI wire form: arguments as a JSON string
            try:
                args = json.loads(args)
            except (ValueError, RecursionError):
                turn.errors.append(f"arguments of {obj['name']} are not valid JSON")
                continue
        if schemas is not None:
            reason = check_call(obj["name"], args, schemas)
            if reason:
                turn.errors.append(reason)
                continue
        elif not isinstance(args, dict):
            turn.errors.append(f"arguments of {obj['name']} are not an object")
            continue
        turn.calls.append(Call(obj["name"], args))
    no_think = _without(text, think_spans)
    rest = _without(no_think, _spans(no_think, CALL_OPEN, CALL_CLOSE))
    if CALL_OPEN in rest:
        turn.errors.append("unclosed <tool_call> tag")
        rest = rest.split(CALL_OPEN)[0]
    if CALL_CLOSE in rest:
        turn.errors.append("stray </tool_call> tag")
        rest = rest.replace(CALL_CLOSE, "")
    turn.text = rest.replace(THINK_OPEN, "").replace(THINK_CLOSE, "").strip()
    first_call = text.find(CALL_OPEN)
    first_think = text.find(THINK_CLOSE)
    turn.think_before_call = bool(turn.think) and first_think != -1 and (
        first_call == -1 or first_think < first_call)
    return turn
