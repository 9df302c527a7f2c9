"""Round 3, long context: many distractor tools, long tool outputs and histories, in length
buckets (`context_tokens`); the plan + finish filter applied per bucket; a replay of earlier
promoted rounds' rows (`rounds.replay`) beside them; packed SFT. Its default target is the
long_context canary, at the same lengths.

A bucket is used only when its tasks fit: the oracle conversation of its longest probe task
plus one turn's budget (`max_new_tokens`) within both `sampler.max_context_tokens` (what the
sampler and the canaries allow) and the model's window, and the conversation itself within
`sft.max_length` (SFT drops longer rows). The others are refused, with the reason, in the
round's stats (`context`); none fitting stops the round before it samples.
"""
from __future__ import annotations

import json
from pathlib import Path

from data import tasks as taskgen
from data.chatformat import render
from pydantic import Field

from .settings import PooledPart, SampledRoundSettings
from rounds.common import Candidate, RoundContext, make_tasks, train
from rounds.pool import accepted_rows
from rounds.replay import replay_rows

class LongContextSettings(PooledPart, SampledRoundSettings):
    """Round 3's keys: a sampled round's and a pool's, the length buckets, a plan demanded
    and the long_context canary as the target by default."""
    require_plan: bool = Field(True, description="filter demands a <think> plan before calls")
    context_tokens: list[int] = Field(default_factory=lambda: [2000],
                                      description="length buckets of long-context tasks (and "
                                                  "the lengths of the long_context canary)")
    target: str = Field("long_context", description="canary that must improve for promotion "
                                                    "(default: long_context, the canary at "
                                                    "this round's lengths)")


SETTINGS = LongContextSettings
PROBE_TASKS = 3  # tasks measured per length (the longest decides)


def run(ctx: RoundContext) -> Candidate:
    lengths = fitting_lengths(ctx)
    tasks = make_tasks(ctx, context_tokens=lengths)          # long_context tasks per length bucket
    accepted = accepted_rows(ctx, tasks, ctx.start_model,    # plans required (require_plan)
                             balance=["length_bucket", "kind"])
    replayed = replay_rows(ctx, accepted)                    # earlier promoted rounds' rows
    return Candidate(train(ctx, accepted + replayed, ctx.start_model), ctx.stats)


def fitting_lengths(ctx: RoundContext) -> list[int]:
    """The configured `context_tokens` whose tasks fit; records used and refused lengths."""
    from engine.models import load_tokenizer
    s, model = ctx.settings, Path(ctx.start_model)
    tok = load_tokenizer(model)
    report = fit(s.context_tokens, lambda text: len(tok.encode(text, add_special_tokens=False)),
                 ctx.cfg.sampler.max_context_tokens, model_window(model), s.max_new_tokens,
                 s.domains, train_length=s.sft.max_length)
    ctx.stats["context"] = report
    ctx.mark("context", **report)
    if not report["used"]:
        raise ValueError(f"round {ctx.number} ({ctx.name}): no context_tokens length fits: "
                         + "; ".join(f"{k}: {v}" for k, v in report["refused"].items())
                         + ". Lower context_tokens or raise sampler.max_context_tokens")
    return report["used"]


def fit(lengths: list[int], count, max_context: int, window: int | None, turn_tokens: int,
        domains: list[str] | None = None, train_length: int | None = None) -> dict:
    """{limit, window, needs: length -> tokens, used: [...], refused: length -> why} (pure
    but for `count`, text -> tokens). A length needs its longest probe task's oracle
    conversation plus `turn_tokens` within min(max_context, window), and the conversation
    within `train_length` when given."""
    limit = min(max_context, window) if window else max_context
    needs, used, refused = {}, [], {}
    for length in lengths:
        conv = max(count(render(t.messages() + t.oracle, t.tools)) for t in (
            taskgen.make("long_context", i, namespace="context-fit", context_tokens=length,
                         domains=taskgen.domain_cycle("long_context", i, domains))
            for i in range(PROBE_TASKS)))
        need = needs[str(length)] = conv + turn_tokens
        if need > limit:
            by = ("sampler.max_context_tokens" if limit == max_context else "the model's window")
            refused[str(length)] = (f"needs {need} tokens (oracle conversation + {turn_tokens} "
                                    f"for a turn), over {by} ({limit})")
        elif train_length and conv > train_length:
            refused[str(length)] = (f"its rows take {conv} tokens, over sft.max_length "
                                    f"({train_length}): training would drop them")
        else:
            used.append(length)
    return {"limit": limit, "max_context_tokens": max_context, "window": window,
            "train_length": train_length, "needs": needs, "used": used, "refused": refused}


def model_window(model_dir: Path) -> int | None:
    """The model's `max_position_embeddings` (config.json), None when it does not say."""
    try:
        conf = json.loads((Path(model_dir) / "config.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return conf.get("max_position_embeddings") or None
