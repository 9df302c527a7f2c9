"""What every tool domain shares: tool declarations, deterministic tables, tool errors.

A domain is a handful of pure functions over mock tables that are derived from stable hashes,
so the same call always returns the same result and a ground truth computed by calling the
domain directly is correct by construction. No shell, no network, no clock.
"""
from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any, Callable

import jsonschema


class ToolError(Exception):
    """A tool failed the way real APIs fail; the message tells the caller how to recover."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message

    def as_result(self) -> dict:
        return {"error": {"code": self.code, "message": self.message}}


def stable_int(*parts: Any, mod: int = 1_000_003) -> int:
    """A deterministic integer from any values (Python's hash() is salted per process)."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") % mod


def tool(name: str, description: str, properties: dict, required: list[str] | None = None) -> dict:
    """An OpenAI-form tool declaration."""
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties,
                       "required": list(properties) if required is None else required}}}


def schema_checked(decl: dict, body: Callable[[dict], Any]) -> Callable[..., Any]:
    """The tool's implementation: arguments checked against its declared schema (unknown
    names refused), declared defaults filled in, then `body(args)`."""
    schema = decl["function"]["parameters"]
    validator = jsonschema.Draft202012Validator(schema)
    props = schema["properties"]

    def run(**args):
        unknown = sorted(set(args) - set(props))
        if unknown:
            raise ToolError("invalid_argument", f"unknown argument(s) {unknown}; this tool "
                                                f"takes {sorted(props)}.")
        err = jsonschema.exceptions.best_match(validator.iter_errors(args))
        if err is not None:
            where = "/".join(map(str, err.absolute_path)) or "arguments"
            raise ToolError("invalid_argument", f"{where}: {err.message}")
        full = {k: json.loads(json.dumps(spec["default"])) for k, spec in props.items()
                if "default" in spec and k not in args}
        return body({**full, **args})
    return run


S = {"type": "string"}
N = {"type": "number"}
I = {"type": "integer"}


@dataclass
class Example:
    """One generated task body: what is asked, the calls a solution makes, the answer."""
    prompt: str
    answer: str | float | None
    steps: list[list[tuple[str, dict]]]  # turns of calls; later args may use earlier results
    final: str                            # the oracle's final answer text
    plan: str = ""
    fault_arg: tuple[str, str, str, str] | None = None  # (tool, arg, bad value, good value)
    tools: list[dict] | None = None  # the tools the task offers (None: all of the domain's)


@dataclass
class Domain:
    name: str
    tools: list[dict]
    impl: dict[str, Callable[..., Any]]
    makers: dict[str, Callable[[random.Random], Example]] = field(default_factory=dict)

    def call(self, name: str, args: dict) -> Any:
        if name not in self.impl:
            raise ToolError("not_found", f"no tool named {name!r}")
        try:
            return self.impl[name](**args)
        except TypeError as err:  # wrong or missing argument names
            raise ToolError("invalid_argument", str(err)) from None

    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools]


def phrase(rng: random.Random, wordings: list[str], **fields: Any) -> str:
    """A request in one of several wordings, drawn after the maker's entities so those stay
    as they were. One wording over a small table gives few distinct prompts; the canaries then
    hold most of them and decontamination leaves training almost none of the domain's calls
    (inventory's single requests: 24 prompts, 95 of 100 draws equal a canary prompt)."""
    return rng.choice(wordings).format(**fields)


def fmt_num(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".") if isinstance(x, float) else str(x)
