"""The one record that flows through a round: task, messages, calls, results, verification.

Stored as JSONL (see `data.jsonl`). Assistant messages hold the raw generated text; the
sampled token ids of each assistant turn ride along so training can prove it sees the same
tokens the sampler produced.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Kind = Literal["single", "parallel", "chained", "irrelevance", "recovery", "long_context",
               "reasoning"]
Finish = Literal["answer", "turn_limit", "token_limit", "parse_error", "pending"]


class Record(BaseModel):
    """Base: unknown fields are errors so a typo in a data file is caught at the row."""
    model_config = ConfigDict(extra="forbid")


class GoldCall(Record):
    name: str
    arguments: dict[str, Any]


class Task(Record):
    """A verifiable multi-turn tool task. `answer` is None when the right move is no call."""
    id: str
    domain: str
    kind: Kind
    seed: int
    system: str
    prompt: str
    history: list[dict[str, Any]] = Field(default_factory=list,
                                          description="earlier turns before the prompt")
    tools: list[dict[str, Any]]
    answer: str | float | None
    gold_calls: list[GoldCall] = Field(default_factory=list,
                                       description="acceptable first calls (single-turn metrics)")
    min_calls: int = Field(0, description="successful tool calls a correct solution needs")
    faults: dict[str, Any] = Field(default_factory=dict,
                                   description="errors the environment injects, by call")
    max_turns: int = 6
    difficulty: int = 1
    decline: bool = Field(False, description="no offered tool serves the request: the answer "
                                             "must say so (a made-up answer fails)")
    oracle: list[dict[str, Any]] = Field(default_factory=list,
                                         description="a correct demonstration (assistant/tool turns)")

    def messages(self) -> list[dict[str, Any]]:
        """The conversation a model starts from."""
        return [{"role": "system", "content": self.system}, *self.history,
                {"role": "user", "content": self.prompt}]


class Verification(Record):
    score: float
    success: bool
    reasons: list[str] = Field(default_factory=list)
    checks: dict[str, bool] = Field(default_factory=dict)


class Trajectory(Record):
    id: str
    task_id: str
    domain: str
    kind: Kind
    round: int = 0
    sample: int = 0
    seed: int = 0
    source: str = "policy"  # policy | oracle | teacher | dataset
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    turn_token_ids: list[list[int]] = Field(default_factory=list,
                                            description="sampled ids of each assistant turn")
    finish: Finish = "pending"
    parse_errors: list[str] = Field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    turns: int = 0
    sampler: dict[str, Any] = Field(default_factory=dict)
    verification: Verification | None = None

    @property
    def success(self) -> bool:
        return bool(self.verification and self.verification.success)
