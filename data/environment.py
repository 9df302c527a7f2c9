"""What a conversation's tools need: one protocol, and the built-in domains as its first kind.

An environment declares its tools, executes one parsed call at a time and returns a typed
`ToolResult` (a value, or a `ToolError` with a code the model can act on), may expose state
for checkers, and is closed when the conversation ends. Drivers never look inside result
text to tell success from failure: the result says so, and the tool message records it
(`"ok"`), which is what the verifier reads.

Kinds of environment: `DomainEnvironment` here (built-in or user domains over mock tables),
and anything else that implements `Environment` (e.g. an external benchmark's executable
classes).

Faults of the built-in domains come from `task.faults` so they are part of the task and
reproducible:
  {"mode": "timeout" | "rate_limit", "tool": T}  T always fails; `T_backup` (declared in the
                                                  task's tools) takes the same arguments.
  {"pad_chars": n}                               every result carries n characters of log text
                                                  (long tool outputs for the long-context round).
Alias faults (not_found / invalid_argument) need no injection: the domains reject the alias
and name the right value in the error, as a real API would.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Protocol

from .chatformat import Call
from .envs import DOMAINS, Domain, ToolError

BACKUP = "_backup"
FILLER = ("status ok shard replica cache warm index region latency p50 p99 trace span "
          "audit retry window quota bucket token").split()


def filler(n_chars: int, seed: int = 0) -> str:
    """Deterministic log-like text of about n characters."""
    words, total, i = [], 0, seed
    while total < n_chars:
        w = FILLER[(i * 7 + 3) % len(FILLER)]
        words.append(w)
        total += len(w) + 1
        i += 1
    return " ".join(words)[:n_chars]


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one call: `value` on success, `error` on failure (never both)."""
    value: Any = None
    error: ToolError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def content(self) -> str:
        """The JSON text the model reads."""
        body = self.value if self.ok else self.error.as_result()
        return body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)

    def message(self, call: Call) -> dict:
        """The tool message appended to the conversation (`ok` is for checkers; the chat
        format renders only `content`)."""
        return {"role": "tool", "name": call.name, "content": self.content(), "ok": self.ok}


class Environment(Protocol):
    """The tools one conversation can call."""
    tools: list[dict]

    def execute(self, call: Call) -> ToolResult:
        """Run one call; a failure is a result with an error, never an exception."""

    def state(self) -> dict:
        """What checkers may inspect after the conversation (calls made, tables touched)."""

    def close(self) -> None:
        """Release what the environment holds."""


def tool_names(tools: Iterable[dict]) -> list[str]:
    return [t.get("function", t)["name"] for t in tools]


class DomainEnvironment:
    """Declared tools dispatched to the domains that implement them, the conversation's own
    domain first; a declared tool no domain implements is `not_found`, never a fake success."""

    def __init__(self, tools: list[dict], faults: dict | None = None,
                 domains: Iterable[Domain] = ()):
        self.tools = tools
        self.faults = faults or {}
        self.calls: list[tuple[Call, bool]] = []
        domains = list(domains) or list(DOMAINS.values())
        self._impl: dict[str, Domain] = {}
        for name in tool_names(tools):
            base = name[:-len(BACKUP)] if name.endswith(BACKUP) else name
            owner = next((d for d in domains if base in d.impl), None)
            if owner is not None:
                self._impl[name] = owner

    @classmethod
    def for_task(cls, task, domains: dict[str, Domain] | None = None) -> DomainEnvironment:
        """The task's own domain first, then every other known domain (distractor tools of
        long-context tasks come from them)."""
        table = domains or DOMAINS
        ordered = ([table[task.domain]] if task.domain in table else []) + \
                  [d for n, d in table.items() if n != task.domain]
        return cls(task.tools, task.faults, ordered)

    def _dispatch(self, call: Call) -> Any:
        name = call.name
        if name not in self._impl:
            raise ToolError("not_found", f"no tool named {name!r} is available.")
        if self.faults.get("tool") == name and self.faults.get("mode") in ("timeout", "rate_limit"):
            what = "timed out" if self.faults["mode"] == "timeout" else "is rate limited"
            raise ToolError(self.faults["mode"], f"{name} {what}. The backup endpoint "
                                                 f"{name}{BACKUP} takes the same arguments.")
        base = name[:-len(BACKUP)] if name.endswith(BACKUP) else name
        return self._impl[name].call(base, dict(call.arguments))

    def execute(self, call: Call) -> ToolResult:
        try:
            result = ToolResult(value=self._dispatch(call))
        except ToolError as err:
            result = ToolResult(error=err)
        self.calls.append((call, result.ok))
        if result.ok and self.faults.get("pad_chars") and isinstance(result.value, dict):
            pad = filler(self.faults["pad_chars"], len(self.calls))
            result = ToolResult(value={**result.value, "log": pad})
        return result

    def state(self) -> dict:
        return {"calls": [{"name": c.name, "arguments": c.arguments, "ok": ok}
                          for c, ok in self.calls]}

    def close(self) -> None:
        self._impl.clear()
