"""The settings each kind of round recipe reads (`rounds.<name>:`), beside the recipes.

Settings classes forbid unknown keys, so a key a recipe does not use (`oracle` on the RL
round, a misspelt `temprature`) fails when the config loads, naming the round and the key.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from data import envs
from data.canary_names import CANARIES, canary_choices, is_canary, off_canary_table
from data.jsonl import DataError
from data.loaders import HUB
from data.taskfile import load_task_files
from data.tasks import OFFERED, makers_for, parse_kind, validate_domain
from data.trajectory import Kind
from engine.settings import Strict
from engine.training.settings import SFTSettings


class Teacher(Strict):
    file: str | None = Field(None, description="teacher traces to mix in: JSONL (or a JSON "
                                               "array) of Hermes / ShareGPT `conversations` or "
                                               "OpenAI `messages` rows, or hub:<dataset>")
    verify: Literal["execute", "schema", "trust"] = Field(
        "schema", description="what a row of `file` must pass to train: execute (re-run its "
                              "calls in its task's or the built-in domains' environment, "
                              "results must agree, the answer is verified), schema (declared "
                              "tools, schema-valid arguments, well-formed turns) or trust "
                              "(well-formed turns; counted as trusted, not verified)")
    endpoint: str | None = Field(None, description="OpenAI-compatible base URL of a teacher model")
    model: str | None = Field(None, description="teacher model name at the endpoint")
    api_key_env: str | None = Field(None, description="environment variable holding the API key")
    k: int = Field(1, ge=1, description="teacher samples per task")

    @field_validator("file")
    @classmethod
    def _file_exists(cls, path: str | None) -> str | None:
        """A missing file fails when the config loads, not after the round has sampled."""
        if path and not path.startswith(HUB) and not Path(path).is_file():
            raise ValueError(f"{path}: teacher file not found")
        return path


class FilterSettings(Strict):
    cap_per_task: int = Field(2, ge=1, description="successes kept per task (shortest first)")
    max_rows: int | None = Field(None, description="accepted rows at most (after balancing)")
    balance: list[str] = Field(default_factory=lambda: ["domain", "kind", "turns"],
                               description="trajectory fields the accepted rows are balanced "
                                           "over (distribution matching)")


class RoundSettings(Strict):
    """What every round has: a switch, its recipe, its tasks and its gate target."""
    enabled: bool = Field(True, description="false: the round is skipped")
    recipe: str | None = Field(None, description="built-in recipe name or dotted path "
                                                 "(default: the round's own name)")
    tasks: dict[str, int] = Field(default_factory=dict, description="task kind -> count; "
                                  "kind@domain draws that kind from one domain only")
    domains: list[str] | None = Field(None, description="tool domains: built-in names or dotted "
                                                        "paths pkg.module:DOMAIN (default: all "
                                                        "built-in)")
    offered_tools: int | dict[str, int] = Field(
        OFFERED, description="tools a task offers at most (1 to 24): the ones its solution "
                             "needs, near misses and other domains' tools, a count drawn per "
                             "task (long-context tasks: by length); or kind -> count, other "
                             f"kinds {OFFERED} (one-call kinds have room for more)")
    target: str = Field("multi_turn", description="canary that must improve for promotion: "
                                                  "a built-in canary or bfcl_<category> of a "
                                                  "category in canaries.bfcl")
    canaries: dict[str, int] = Field(default_factory=dict,
                                     description="this round's gate sizes of built-in canaries, "
                                                 "over canaries.sizes (e.g. {multi_turn: 100} "
                                                 "for a large target)")
    drop_abs: dict[str, float] = Field(default_factory=dict,
                                       description="this round's gate drop tolerances over "
                                                   "gate.drop_abs (canary -> absolute drop "
                                                   "in [0, 1])")

    @model_validator(mode="after")
    def _check(self):
        wrong = off_canary_table(self.drop_abs)
        if wrong:
            raise ValueError(f"drop_abs: {wrong}: keys must be canaries ({canary_choices()}), "
                             "values in [0, 1]")
        bad = {}
        for spec in [*(self.domains or []), *(k.partition("@")[2] for k in self.tasks)]:
            if spec:  # a domain module may register task kinds: import it before they are read
                envs.resolve(spec)
        for kind in self.tasks:
            try:
                parse_kind(kind)
            except ValueError as err:
                bad[kind] = err
        if bad:
            raise ValueError(f"unknown task kind(s) {sorted(bad)}: {next(iter(bad.values()))}")
        sizes = (self.offered_tools if isinstance(self.offered_tools, dict)
                 else {"offered_tools": self.offered_tools})
        wrong = {k: n for k, n in sizes.items() if not 1 <= n <= 24}
        if wrong:
            raise ValueError(f"offered_tools: {wrong}: a task offers 1 to 24 tools")
        asked = {parse_kind(k)[0] for k in self.tasks} | set(self.tasks)
        stray = sorted(set(sizes) - asked - {"offered_tools"})
        if stray:
            raise ValueError(f"offered_tools: {stray} name no kind in this round's tasks "
                             f"({', '.join(self.tasks) or 'none'})")
        negative = {k: n for k, n in self.tasks.items() if n < 0}
        if negative:
            raise ValueError(f"tasks: {negative}: a task count must be >= 0 (0 makes none)")
        unknown = sorted(set(self.canaries) - set(CANARIES))
        if unknown:
            raise ValueError(f"canaries: unknown built-in canary(ies) {unknown}; choose from "
                             f"{', '.join(CANARIES)} (BFCL canaries are sized in canaries.bfcl)")
        negative = {c: n for c, n in self.canaries.items() if n < 0}
        if negative:
            raise ValueError(f"canaries: {negative}: a size must be >= 0")
        if not is_canary(self.target):
            raise ValueError(f"target {self.target!r} is not a canary; choose from "
                             f"{canary_choices()}")
        if self.domains is not None or any(parse_kind(k)[1] for k in self.tasks):
            check_domains(self.domains, self.tasks)
        return self

    def offer_for(self, spec: str) -> int:
        """How many tools a task of `spec` (kind or kind@domain) offers at most."""
        if isinstance(self.offered_tools, int):
            return self.offered_tools
        return self.offered_tools.get(spec, self.offered_tools.get(parse_kind(spec)[0], OFFERED))


def check_domains(specs: list[str] | None, tasks: dict[str, int]) -> None:
    """Resolve each domain (built-in name or dotted path; `specs` None: the built-in ones)
    and each domain a `kind@domain` names, prove the oracles of a domain outside the built-in
    six score 1.0 on a few tasks of every kind it supports, and refuse task kinds that none
    of the domains can make. Raises ValueError naming the domain, the kind and what failed."""
    if specs is not None and not specs:
        raise ValueError("domains is empty: name at least one domain, or leave it out")
    pinned = {k: parse_kind(k) for k in tasks}
    named = list(specs) if specs is not None else list(envs.BUILTIN)
    extra = [d for _, d in pinned.values() if d and d not in named]
    names = {}
    for spec in dict.fromkeys(named + extra):
        name = names[spec] = envs.resolve(spec).name
        if name not in envs.BUILTIN:
            bad = validate_domain(name)
            if bad:
                raise ValueError(f"domain {spec!r} failed validation: " + "; ".join(bad))
    unmade = [k for k, n in tasks.items() if n and not makers_for(
        pinned[k][0], [names[pinned[k][1]]] if pinned[k][1] else [names[s] for s in named])]
    if unmade:
        raise ValueError(f"no configured domain makes task kind(s) {unmade} (domains: "
                         f"{list(names.values())}); add a domain with those makers or drop "
                         "the kinds")


class SampledRoundSettings(RoundSettings):
    """Rounds that sample the current model, filter verified successes and run SFT."""
    k: int = Field(1, ge=1, description="samples per task from the current model")
    temperature: float = Field(0.8, ge=0.0, description="sampling temperature of the round's "
                                                        "samples")
    top_p: float = Field(0.95, gt=0.0, le=1.0, description="nucleus sampling: the smallest "
                                                           "token set of this probability")
    max_new_tokens: int = Field(192, ge=8, description="tokens per assistant turn")
    require_plan: bool = Field(False, description="filter demands a <think> plan before calls")
    oracle: bool = Field(False, description="add the tasks' oracle demonstrations")
    task_files: list[str] = Field(default_factory=list,
                                  description="JSONL task files read beside the generated "
                                              "tasks (instead of them with tasks: {}); "
                                              "format: data/taskfile.py")
    filter: FilterSettings = Field(default_factory=FilterSettings,
                                   description="which verified successes train")
    sft: SFTSettings = Field(default_factory=SFTSettings, description="LoRA SFT on the accepted "
                                                                      "rows")

    @model_validator(mode="after")
    def _check_task_files(self):
        """Every row of every task file valid now (after `domains` registered user domains),
        not after sampling; the error names file, line and field."""
        try:
            load_task_files(self.task_files)
        except DataError as err:
            raise ValueError(f"task_files: {err}") from None
        return self


class PoolSettings(Strict):
    """A pass-rate-aware pool (`rounds.pool`): a probe of `k_probe` samples per task
    estimates each task's pass rate; extra samples go to the tasks it finds hard (DART-Math's
    difficulty-aware allocation), none to tasks every probe sample solved; the verified
    successes of the difficulties in `train_on` train. The defaults suit the tiny preset."""
    k_probe: int = Field(2, ge=1, description="samples per task in the probe")
    k_max: int = Field(4, ge=1, description="samples per task at most, probe included")
    budget: int | None = Field(None, ge=1, description="samples in all per pool, probe "
                                                       "included "
                                                       "(default: k_max per unsolved or "
                                                       "frontier task)")
    unsolved_weight: float = Field(0.5, ge=0.0, le=1.0,
                                   description="extra samples of a task the probe never "
                                               "solved, as if it failed this share of the "
                                               "time (a frontier task weighs its fail rate; "
                                               "1.0: plain DART-Math Prop2Diff)")
    train_on: list[Literal["solved", "frontier", "unsolved"]] = Field(
        default_factory=lambda: ["frontier"],
        description="difficulties whose rows train: frontier (solved sometimes), solved "
                    "(every sample), unsolved (no success: needs oracle: true)")

    always_train: list[Kind] = Field(
        default_factory=list,
        description="task kinds whose verified successes train whatever their difficulty "
                    "(and, with oracle: true, whose unsolved tasks' oracle rows do): a replay "
                    "of a skill the round's own rows would wear down, e.g. [irrelevance] "
                    "(mismatch tasks count as irrelevance) beside on-policy tool calls")

    @model_validator(mode="after")
    def _check(self):
        if self.k_max < self.k_probe:
            raise ValueError(f"pool: k_max ({self.k_max}) is below k_probe ({self.k_probe}); "
                             "k_max counts the probe's samples too")
        if not self.train_on:
            raise ValueError("pool.train_on is empty: name at least one of solved, frontier, "
                             "unsolved")
        return self


class ReplaySettings(Strict):
    """Rows replayed from the accepted sets that trained the rounds promoted before this one
    (`rounds.replay`), so a round does not wear down what they taught: a sample matched to
    their kind x domain mix, seeded from (round, run seed), never a row decontamination
    drops."""
    share: float = Field(0.3, ge=0.0, lt=1.0,
                         description="replayed rows as a share of all training rows (new + "
                                     "replayed); 0 turns replay off")


class PooledPart(Strict):
    """The part of a sampled round that can draw a pass-rate-aware pool instead of k samples
    per task and replays earlier promoted rounds' rows beside its own; composed with
    `SampledRoundSettings` (its check reads that part's k, oracle and tasks)."""
    pool: PoolSettings | None = Field(None, description="pass-rate-aware pool (unset: k "
                                                        "samples per task, every verified "
                                                        "success kept)")
    replay: ReplaySettings = Field(default_factory=ReplaySettings,
                                   description="replay of earlier promoted rounds' training "
                                               "rows (share 0: off)")

    @model_validator(mode="after")
    def _check_pool(self):
        p = self.pool
        if p is None:
            return self
        if self.k != type(self).model_fields["k"].default:  # (a dumped config says k: 1)
            raise ValueError("k and pool are both set: a pool samples pool.k_probe per task, "
                             "then tops up to pool.k_max; drop k")
        if "unsolved" in p.train_on and not self.oracle:
            raise ValueError("pool.train_on names unsolved, but an unsolved task has no "
                             "verified sample to keep: set oracle: true (its oracle rows "
                             "train) or drop unsolved")
        probe = p.k_probe * sum(self.tasks.values())
        if p.budget is not None and p.budget < probe:
            raise ValueError(f"pool.budget {p.budget} is below the probe alone ({p.k_probe} "
                             f"samples x {sum(self.tasks.values())} tasks = {probe}); raise "
                             "it or lower pool.k_probe")
        return self
