"""The one interface every sampler backend implements.

A backend turns rendered prompts (strings from `data.chatformat.render(...,
add_generation_prompt=True)`) into completions. The multi-turn driver (`pipeline.rollout`)
owns conversations, parsing and tools; backends only generate.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

STOP = ["</tool_call>", "<|im_end|>"]


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


class Backend(Protocol):
    name: str

    def generate(self, prompts: list[str], params: SamplingParams,
                 seeds: list[int]) -> list[Completion]:
        """One completion per prompt; `seeds[i]` seeds prompt i (reproducible sampling)."""

    def close(self) -> None:
        """Release engines, processes and memory."""
