"""Filters from rollouts to an accepted training set; each reports what it dropped and why.

Order in a round: rejection (verified successes) -> dedup -> decontamination -> distribution
matching. Every filter returns (kept, FilterReport) and never mutates its input.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, NamedTuple, Sequence

from .trajectory import Trajectory

NGRAM = 13


@dataclass
class FilterReport:
    name: str
    seen: int = 0
    kept: int = 0
    dropped: Counter = field(default_factory=Counter)  # reason -> rows
    by_source: Counter = field(default_factory=Counter)  # decontamination: source -> rows

    def as_dict(self) -> dict:
        out = {"filter": self.name, "seen": self.seen, "kept": self.kept,
               "dropped": dict(self.dropped)}
        if self.by_source:
            out["by_source"] = dict(self.by_source)
        return out


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower()).strip()


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def rejection(rows: Sequence[Trajectory]) -> tuple[list[Trajectory], FilterReport]:
    """Keep verified successes; count failures by their first reason."""
    rep, kept = FilterReport("rejection", seen=len(rows)), []
    for t in rows:
        if t.success:
            kept.append(t)
        else:
            reasons = t.verification.reasons if t.verification else ["not verified"]
            first = (reasons or ["failed"])[0]
            rep.dropped[re.sub(r"['\"].*", "", first).strip()[:60]] += 1
    rep.kept = len(kept)
    return kept, rep


def trajectory_hash(t: Trajectory) -> str:
    """Normalised hash of what the model did (assistant + tool turns), case and spacing folded."""
    body = [(m["role"], _norm(m.get("content") or "")) for m in t.messages if m["role"] != "system"]
    return hashlib.sha1(json.dumps(body).encode()).hexdigest()


def dedup(rows: Sequence[Trajectory], key: Callable[[Trajectory], str] = trajectory_hash
          ) -> tuple[list[Trajectory], FilterReport]:
    rep, seen, kept = FilterReport("dedup", seen=len(rows)), set(), []
    for t in rows:
        h = key(t)
        if h in seen:
            rep.dropped["duplicate trajectory"] += 1
            continue
        seen.add(h)
        kept.append(t)
    rep.kept = len(kept)
    return kept, rep


class Hit(NamedTuple):
    """Why a prompt is contaminated: the protected source it matches, and how."""
    source: str   # e.g. canary | bfcl | file
    how: str      # equal | ngram


class Decontaminator:
    """Exact normalised-prompt hashes plus 13-gram overlap against every canary / eval prompt.

    `protected_prompts` is a list (all of source "canary") or a mapping source -> prompts
    (e.g. canary, file, bfcl), so every drop can be counted by the evaluation it protects.
    Generated prompts share template text; a 13-gram found in at least `boilerplate_df`
    protected prompts (of any source) is template boilerplate, not an item's identity, and
    is ignored (otherwise every training item of a long template would count as
    contaminated).
    """

    def __init__(self, protected_prompts: Iterable[str] | Mapping[str, Iterable[str]],
                 n: int = NGRAM, boilerplate_df: int = 3):
        self.n = n
        sources = (dict(protected_prompts) if isinstance(protected_prompts, Mapping)
                   else {"canary": protected_prompts})
        self.hashes: dict[str, str] = {}          # prompt hash -> source
        self.sizes: dict[str, int] = {}           # source -> prompts
        owner: dict[tuple[str, ...], str] = {}    # 13-gram -> the first source holding it
        df: Counter = Counter()
        for source, prompts in sources.items():
            prompts = list(prompts)
            self.sizes[source] = len(prompts)
            for p in prompts:
                self.hashes.setdefault(hashlib.sha1(_norm(p).encode()).hexdigest(), source)
                grams = self._grams(p)
                df.update(grams)
                for g in grams:
                    owner.setdefault(g, source)
        self.grams = {g: owner[g] for g, c in df.items() if c < boilerplate_df}
        self.boilerplate = len(df) - len(self.grams)

    def _grams(self, text: str) -> set[tuple[str, ...]]:
        w = _words(text)
        return {tuple(w[i:i + self.n]) for i in range(len(w) - self.n + 1)}

    def hit(self, prompt: str) -> Hit | None:
        """The source `prompt` equals or shares a 13-gram with; None when clean."""
        source = self.hashes.get(hashlib.sha1(_norm(prompt).encode()).hexdigest())
        if source:
            return Hit(source, "equal")
        if self.grams:
            shared = self._grams(prompt) & self.grams.keys()
            if shared:
                return Hit(self.grams[min(shared)], "ngram")
        return None

    def reason(self, prompt: str) -> str | None:
        hit = self.hit(prompt)
        return None if hit is None else describe(hit, self.n)


def describe(hit: Hit, n: int = NGRAM) -> str:
    """A drop reason: `prompt equals a bfcl prompt`, `shares a 13-gram with a canary prompt`."""
    if hit.how == "equal":
        return f"prompt equals a {hit.source} prompt"
    return f"shares a {n}-gram with a {hit.source} prompt"


def user_turns(t: Trajectory) -> list[str]:
    """Every user message of a trajectory (tool results sent as user turns left out): a
    multi-turn teacher row is checked turn by turn, not only by its last question."""
    return [m["content"] for m in t.messages if m["role"] == "user"
            and isinstance(m.get("content"), str) and "<tool_response>" not in m["content"]]


def decontaminate(rows: Sequence, protected: Decontaminator,
                  prompt_of: Callable = user_turns) -> tuple[list, FilterReport]:
    """Works on trajectories (every user turn checked) or tasks (pass
    `prompt_of=lambda t: t.prompt`); `prompt_of` returns one text or a list of them.
    Drops are counted by reason and by protected source."""
    rep, kept = FilterReport("decontaminate", seen=len(rows)), []
    for t in rows:
        texts = prompt_of(t)
        hit = next((h for h in map(protected.hit, [texts] if isinstance(texts, str) else texts)
                    if h), None)
        if hit:
            rep.dropped[describe(hit, protected.n)] += 1
            rep.by_source[hit.source] += 1
        else:
            kept.append(t)
    rep.kept = len(kept)
    return kept, rep


def distribution_match(rows: Sequence[Trajectory], cap_per_task: int = 2,
                       balance: Sequence[str] = ("domain", "kind", "turns"),
                       max_rows: int | None = None) -> tuple[list[Trajectory], FilterReport]:
    """Cap successes per task (shortest first), then balance groups round-robin.

    Preferring the shortest success keeps the model from learning detours; balancing across
    domain x kind x turn count keeps easy, plentiful groups from drowning the rare ones.
    """
    rep = FilterReport("distribution_match", seen=len(rows))
    by_task: dict[str, list[Trajectory]] = defaultdict(list)
    for t in rows:
        by_task[t.task_id].append(t)
    capped = []
    for ts in by_task.values():
        ts = sorted(ts, key=lambda t: (t.completion_tokens or _len(t), t.id))
        capped += ts[:cap_per_task]
        if len(ts) > cap_per_task:
            rep.dropped["over the per-task cap"] += len(ts) - cap_per_task
    groups: dict[tuple, list[Trajectory]] = defaultdict(list)
    for t in capped:
        groups[tuple(_attr(t, b) for b in balance)].append(t)
    limit = len(capped) if max_rows is None else min(max_rows, len(capped))
    kept, queues = [], [sorted(g, key=lambda t: t.id) for _, g in sorted(groups.items())]
    while len(kept) < limit and queues:  # round-robin: each group gives one row per pass
        for q in list(queues):
            if len(kept) >= limit:
                break
            kept.append(q.pop(0))
            if not q:
                queues.remove(q)
    if len(capped) > len(kept):
        rep.dropped["balance: over-represented group"] += len(capped) - len(kept)
    rep.kept = len(kept)
    return kept, rep


def _len(t: Trajectory) -> int:
    return sum(len(m.get("content") or "") for m in t.messages if m["role"] == "assistant")


def _attr(t: Trajectory, name: str):
    """A balancing key: a trajectory field, its turn count, or its length bucket (~1k tokens)."""
    if name == "length_bucket":
        return sum(len(m.get("content") or "") for m in t.messages) // 4000
    if name == "turns":
        return t.turns or sum(m["role"] == "assistant" for m in t.messages)
    return getattr(t, name)
