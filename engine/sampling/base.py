"""The one interface every sampler backend implements.

A backend turns rendered prompts (strings from `data.chatformat.render(...,
add_generation_prompt=True)`) into completions. The multi-turn driver (`engine.rollout`)
owns conversations, parsing and tools; backends only generate.

Chat-mode backends (an OpenAI-compatible chat endpoint that applies its own template) also
receive `conversations`: for prompt i, the (messages, tools) it was rendered from.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

STOP = ["</tool_call>", "<|im_end|>"]
CALL_STOP = "</tool_call>"
Conversation = tuple[list[dict[str, Any]], list[dict[str, Any]]]  # (messages, tools)


@dataclass
class SamplingParams:
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    stop: list[str] = field(default_factory=lambda: list(STOP))


@dataclass
class Completion:
    text: str                 # generated text, stop string included when it was `</tool_call>`
    token_ids: list[int]      # the sampled ids, exactly as generated
    prompt_tokens: int
    finish_reason: str        # "stop" | "length"
    stop_reason: str | None = None  # "</tool_call>" when that stop string ended it, else None


class Backend(Protocol):
    name: str

    def generate(self, prompts: list[str], params: SamplingParams, seeds: list[int],
                 conversations: list[Conversation] | None = None) -> list[Completion]:
        """One completion per prompt; `seeds[i]` seeds prompt i (reproducible sampling).
        `conversations` is optional and only read by chat-mode backends."""

    def close(self) -> None:
        """Release engines, processes and memory."""


class BackendError(RuntimeError):
    """A backend could not run (engine failed to start, server unreachable); says what to do."""


def cut_at_stop(text: str, stops: list[str]) -> tuple[str, str | None]:
    """Cut `text` after the earliest stop string: `</tool_call>` is kept in the text (the
    driver continues the turn after it), any other stop is dropped. Returns (text, stop)."""
    best, which = None, None
    for s in stops:
        i = text.find(s)
        if i != -1 and (best is None or i < best):
            best, which = i, s
    if which is None:
        return text, None
    return (text[:best + len(which)] if which == CALL_STOP else text[:best]), which
