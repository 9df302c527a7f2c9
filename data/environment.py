"""A task's tool runtime: dispatches calls to the domains and injects the task's faults.

Faults come from `task.faults` so they are part of the task and reproducible:
  {"mode": "timeout" | "rate_limit", "tool": T}  T always fails; `T_backup` (declared in the
                                                  task's tools) takes the same arguments.
  {"pad_chars": n}                               every result carries n characters of log text
                                                  (long tool outputs for the long-context round).
Alias faults (not_found / invalid_argument) need no injection: the domains reject the alias
and name the right value in the error, as a real API would.
"""
from __future__ import annotations

import json
from typing import Any

from .chatformat import Call
from .envs import DOMAINS, ToolError

TOOL_DOMAIN = {name: d for d in DOMAINS.values() for name in d.tool_names()}
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


class Environment:
    def __init__(self, task):
        self.task = task
        self.declared = {t["function"]["name"] for t in task.tools}
        self.faults = task.faults or {}
        self.calls: list[tuple[Call, bool]] = []  # (call, succeeded)

    def _dispatch(self, call: Call) -> Any:
        name = call.name
        if name not in self.declared:
            raise ToolError("not_found", f"no tool named {name!r} is available.")
        if self.faults.get("tool") == name and self.faults.get("mode") in ("timeout", "rate_limit"):
            what = "timed out" if self.faults["mode"] == "timeout" else "is rate limited"
            raise ToolError(self.faults["mode"], f"{name} {what}. The backup endpoint "
                                                 f"{name}{BACKUP} takes the same arguments.")
        base = name[:-len(BACKUP)] if name.endswith(BACKUP) else name
        if base not in TOOL_DOMAIN:  # a distractor tool: declared, harmless, useless
            return {"status": "ok", "items": []}
        return TOOL_DOMAIN[base].call(base, dict(call.arguments))

    def execute(self, call: Call) -> str:
        """Run one call; always returns the JSON text the model will read."""
        try:
            result, ok = self._dispatch(call), True
        except ToolError as err:
            result, ok = err.as_result(), False
        self.calls.append((call, ok))
        if ok and self.faults.get("pad_chars") and isinstance(result, dict):
            result = {**result, "log": filler(self.faults["pad_chars"], len(self.calls))}
        return json.dumps(result, ensure_ascii=False)
