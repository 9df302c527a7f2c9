"""Run configuration: YAML -> validated, typed settings. Unknown keys and wrong types fail before
any work starts, naming the file and the key.

Precedence: built-in defaults < preset/config file < `key.path=value` overrides on the CLI.
"""
from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, ClassVar, Iterable, Literal

import yaml
from pydantic import (BaseModel, ConfigDict, Field, ValidationError, ValidationInfo,
                      field_validator, model_validator)

from pipeline import recipes
from engine.quants import QUANTS
from data.bfcl import CATEGORIES as BFCL_CATEGORIES
from pipeline.recipes import (BFCL_PREFIX, CANARIES, RoundSettings, canary_choices,
                              off_canary_table)

CONFIG_DIR = Path(__file__).with_name("configs")
PRESETS = {p.stem: p for p in sorted(CONFIG_DIR.glob("*.yaml"))}


class ConfigError(ValueError):
    """The config is wrong; the message names the file and key and says what to do."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GateSettings(Strict):
    """The gate's thresholds, which the promote decision reads as they are, and what a failed
    gate does to the run (`on_fail`)."""
    DEFAULT_DROP_ABS: ClassVar[float] = 0.02  # drop tolerance of a canary not in `drop_abs`

    keep_se: float = Field(2.0, ge=0, description="target must improve by this many paired SEs")
    drop_se: float = Field(2.0, ge=0, description="no canary may drop by more than this many SEs")
    allow_tie: bool = Field(False, description="target passes at delta >= 0 (relaxed presets "
                                               "only: a random tiny model cannot improve)")
    drop_abs: dict[str, float] = Field(default_factory=dict,
                                       description="absolute drop tolerance per canary "
                                                   "(default 0.02); bfcl_<category> too")
    floors: dict[str, float] = Field(default_factory=dict, description="absolute floor per "
                                                                       "canary; bfcl_<category> "
                                                                       "too (configured ones)")
    anchored: list[str] = Field(default_factory=list,
                                description="canaries that must also stay within the drop "
                                            "rule of the base model's score, not only of the "
                                            "previous promoted model's: drops that are each "
                                            "within noise cannot add up below the base over "
                                            "the rounds")
    relaxed: bool = Field(False, description="thresholds relaxed (tiny preset); shown in reports")
    on_fail: Literal["stop", "skip"] = Field("stop", description="a failed gate stops the run or "
                                                                 "skips the round")

    @model_validator(mode="after")
    def _check(self):
        for name, table in (("drop_abs", self.drop_abs), ("floors", self.floors),
                            ("anchored", dict.fromkeys(self.anchored, 0.0))):
            bad = off_canary_table(table)
            if bad:
                raise ValueError(f"gate.{name}: {bad}: keys must be canaries ("
                                 f"{canary_choices()}), values in [0, 1]")
        if self.allow_tie and not self.relaxed:
            raise ValueError("gate.allow_tie needs gate.relaxed: true (it is shown as relaxed "
                             "in every report)")
        return self

    def tolerance_abs(self, canary: str) -> float:
        """How far `canary` may drop whatever its SE: its `drop_abs` entry, else 0.02."""
        return float(self.drop_abs.get(canary, self.DEFAULT_DROP_ABS))

    def for_round(self, rs: RoundSettings) -> GateSettings:
        """These thresholds with the round's own `drop_abs` entries over `drop_abs`."""
        if not rs.drop_abs:
            return self
        return self.model_copy(update={"drop_abs": {**self.drop_abs, **rs.drop_abs}})

    def to_dict(self, canaries: Iterable[str] = ()) -> dict:
        """The thresholds as gate reports record them, the tolerance of every built-in canary,
        of every canary in `drop_abs` and of `canaries` (the evaluated ones: BFCL) spelled out."""
        names = dict.fromkeys([*CANARIES, *self.drop_abs, *canaries])
        return {"keep_se": self.keep_se, "drop_se": self.drop_se,
                "drop_abs": {c: self.tolerance_abs(c) for c in names},
                "floors": dict(self.floors), "anchored": list(self.anchored),
                "relaxed": self.relaxed,
                "allow_tie": self.allow_tie}


class CanarySettings(Strict):
    version: str = Field("v2", description="canary item set; a new version draws new items "
                                           "(v2: the reasoning generator never makes negative "
                                           "change)")
    k: int = Field(2, ge=1, description="samples per item (pass@k)")
    sizes: dict[str, int] = Field(default_factory=lambda: {c: 20 for c in CANARIES},
                                  description="items per built-in canary (every gate; a round's "
                                              "canaries key sizes its own)")
    max_new_tokens: int = Field(192, ge=8, description="tokens per assistant turn of a canary "
                                                       "(0 would score empty outputs)")
    temperature: float = Field(0.7, ge=0.0, description="sampling temperature of evaluations "
                                                        "(0: greedy)")
    files: list[str] = Field(default_factory=list, description="extra suites: BFCL/GSM8K files")
    bfcl: dict[str, int] = Field(default_factory=dict,
                                 description="BFCL categories as canaries, category -> items "
                                             "(a seeded sample per version), scored by BFCL's "
                                             "own checkers; suites named bfcl_<category>")

    @model_validator(mode="after")
    def _check(self):
        bad = set(self.sizes) - set(CANARIES)
        if bad:
            raise ValueError(f"unknown canary(ies) {sorted(bad)}; choose from {CANARIES}")
        small = {c: n for c, n in self.sizes.items() if n < 1}
        if small:
            raise ValueError(f"canaries.sizes: {small}: a canary needs at least 1 item (leave "
                             "it out to skip it)")
        return self

    @field_validator("bfcl")
    @classmethod
    def _bfcl(cls, sizes: dict[str, int]) -> dict[str, int]:
        bad = [c for c in sizes if c not in BFCL_CATEGORIES]
        if bad:
            raise ValueError(f"unknown BFCL category(ies) {bad}; choose from "
                             f"{', '.join(BFCL_CATEGORIES)}")
        small = {c: n for c, n in sizes.items() if n < 1}
        if small:
            raise ValueError(f"{small}: a BFCL canary needs at least 1 item (leave the "
                             "category out to skip it)")
        return sizes

    def size(self, canary: str, rs: RoundSettings | None = None) -> int:
        """Configured items of `canary` (built-in or `bfcl_<category>`) in round `rs`'s gate
        (None: the run-wide size); 0 if not configured. A BFCL category with fewer items than
        asked for gives all it has."""
        if canary.startswith(BFCL_PREFIX) and canary not in CANARIES:
            return int(self.bfcl.get(canary[len(BFCL_PREFIX):], 0))
        return int(self.sizes_for(rs).get(canary, 0))

    def sizes_for(self, rs: RoundSettings | None = None) -> dict[str, int]:
        """Built-in canary sizes of round `rs`'s gate: `sizes`, with the round's own
        `canaries` over them (None: `sizes`)."""
        return {**self.sizes, **(rs.canaries if rs is not None else {})}

    def largest_sizes(self, rounds: Iterable[RoundSettings]) -> dict[str, int]:
        """Each built-in canary at its largest size over `rounds` and `sizes`: the items
        whose prompts no training row may share. Canary items are prefix-stable (the first n
        of a larger suite are the suite of n), so these cover every round's suites."""
        out = dict(self.sizes)
        for rs in rounds:
            for name, n in rs.canaries.items():
                out[name] = max(n, out.get(name, 0))
        return out


class ExportSettings(Strict):
    enabled: bool = Field(True, description="export every promoted model to GGUF")
    quant: Literal[tuple(QUANTS)] = Field("Q6_K", description="llama.cpp quantization of the "
                                                              "GGUF")
    load_check: bool = Field(True, description="play canary items through the GGUF (llama.cpp) "
                                               "and the merged HF model; fail when they disagree")
    check_items: int = Field(6, ge=1, description="canary items the load check plays")
    min_agreement: float = Field(0.5, ge=0.0, le=1.0,
                                 description="the load check fails below this share of items "
                                             "where the GGUF and the HF model agree")
    check_max_tokens: int = Field(96, ge=8, description="tokens per turn in the load check")
    system: str | None = Field(None, description="system prompt written into the Modelfile")


_SECRET = re.compile(r"api[_-]?key|secret|passw(or)?d|token$|^auth|credential|private[_-]?key",
                     re.I)  # `max_tokens` ends in "tokens", not "token"


class SamplerSettings(Strict):
    backend: Literal["auto", "vllm", "transformers", "llama_cpp", "openai"] = Field(
        "auto", description="auto: vLLM where installed, else transformers; llama_cpp samples "
                            "a GGUF, openai an OpenAI-compatible server")
    options: dict[str, Any] = Field(default_factory=dict,
                                    description="passed to the backend: vLLM's "
                                                "gpu_memory_utilization, tensor_parallel_size, "
                                                "kv_cache_gib, cpu_bind (all, auto, nobind or "
                                                "a CPU list; default all); llama.cpp's "
                                                "extra_buffers (default false)")
    max_context_tokens: int = Field(4096, ge=256, description="context window of the sampler "
                                                              "(prompt and generated tokens)")

    @field_validator("options")
    @classmethod
    def _no_secrets(cls, options: dict[str, Any]) -> dict[str, Any]:
        """run.yaml records every option in clear: a secret never goes in; the backend reads
        it from the environment variable named by `api_key_env`."""
        secret = [k for k in options if _SECRET.search(k) and not k.endswith("_env")]
        if secret:
            raise ValueError(f"sampler.options.{secret[0]}: looks like a secret, which would be "
                             "written in clear to run.yaml; put it in an environment variable "
                             "and name that variable in sampler.options.api_key_env")
        return options


class RunConfig(Strict):
    name: str = Field("default", description="run name (the run directory defaults to "
                                             "runs/<name>)")
    run_dir: str | None = Field(None, description="default: runs/<name>")
    model: str = Field("embedded:smollm2-135m", description="base model: embedded:smollm2-135m, "
                                                            "tiny:W, or an HF directory")
    trust_remote_code: bool = Field(False, description="not read yet: models load without "
                                                       "remote code whatever it says")
    seed: int = Field(0, description="not read yet: seeds derive from round, task and sample "
                                     "(and sft.seed, grpo.seed)")
    sampler: SamplerSettings = Field(default_factory=SamplerSettings,
                                     description="how rounds and gates sample the model")
    canaries: CanarySettings = Field(default_factory=CanarySettings,
                                     description="held-out suites every gate evaluates")
    gate: GateSettings = Field(default_factory=GateSettings,
                               description="when a round's model is promoted")
    export: ExportSettings = Field(default_factory=ExportSettings,
                                   description="GGUF export of promoted models")
    rounds: dict[str, RoundSettings] = Field(
        default_factory=dict, description="round name -> its recipe's settings, in run order "
                                          "(built-in rounds left out run with defaults)")

    @field_validator("rounds", mode="before")
    @classmethod
    def _rounds(cls, raw):
        """Each round's keys validated by its own recipe's settings class."""
        raw = raw or {}
        if not isinstance(raw, dict):
            raise ValueError("rounds must map round names to their settings")
        out, problems = {}, []
        for name in recipes.ordered(list(raw)):
            body = raw.get(name) or {}
            if isinstance(body, RoundSettings):
                out[name] = body
                continue
            spec = body.get("recipe") or name if isinstance(body, dict) else name
            try:
                out[name] = recipes.resolve(spec).SETTINGS.model_validate(body)
            except ValueError as err:  # pydantic's ValidationError is a ValueError too
                problems += _round_problems(name, spec, err)
        if problems:
            raise ValueError("; ".join(problems))
        return out

    @field_validator("gate")
    @classmethod
    def _gate_canaries(cls, gate: GateSettings, info: ValidationInfo) -> GateSettings:
        """A floor on a BFCL canary that is not configured would fail every gate."""
        canaries = info.data.get("canaries")
        if canaries is not None:
            unset = [c for c in gate.floors if c.startswith(BFCL_PREFIX) and c not in CANARIES
                     and not canaries.size(c)]
            if unset:
                raise ValueError(f"gate.floors: {unset} not configured; add the categories to "
                                 "canaries.bfcl or drop the floors")
        return gate

    @field_validator("rounds")
    @classmethod
    def _targets(cls, rounds: dict[str, RoundSettings], info: ValidationInfo) -> dict:
        """Each round's target is a canary the gate evaluates (one with items)."""
        canaries = info.data.get("canaries")
        if canaries is None:
            return rounds
        problems = []
        for name, rs in rounds.items():
            if not rs.enabled or canaries.size(rs.target, rs):
                continue
            if rs.target.startswith(BFCL_PREFIX) and rs.target not in CANARIES:
                fix = (f"add it to canaries.bfcl (e.g. canaries.bfcl: "
                       f"{{{rs.target[len(BFCL_PREFIX):]}: 50}})")
            else:
                fix = "give it items in canaries.sizes"
            problems.append(f"rounds.{name}.target: canary {rs.target!r} is not configured; "
                            + fix)
        if problems:
            raise ValueError("; ".join(problems))
        return rounds

    def planned_rounds(self) -> list[tuple[int, str, RoundSettings]]:
        """(number, name, settings) of every round, in run order, numbered from 1."""
        return [(n, name, rs) for n, (name, rs) in enumerate(self.rounds.items(), 1)]

    def directory(self) -> Path:
        return Path(self.run_dir or f"runs/{self.name}")


def _round_problems(name: str, spec: str, err: ValueError) -> list[str]:
    """One line per problem of a round's settings, naming the round, the key and the recipe."""
    if not isinstance(err, ValidationError):
        return [f"rounds.{name}: {err}"]
    out = []
    for e in err.errors():
        key = ".".join(str(p) for p in (name, *e["loc"]))
        if e["type"] == "extra_forbidden":
            out.append(f"rounds.{key}: unknown key (recipe {spec!r} does not use it)")
        else:
            out.append(f"rounds.{key}: {e['msg'].removeprefix('Value error, ')}")
    return out


def _set(tree: dict, dotted: str, raw: str) -> None:
    keys = dotted.split(".")
    node = tree
    for k in keys[:-1]:
        node = node.setdefault(k, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {dotted}: {k} is not a section")
    node[keys[-1]] = yaml.safe_load(raw)


def merge(base: dict, over: dict) -> dict:
    """`over` on top of `base`: mappings merge key by key (recursively), anything else in
    `over` (a value, a list) replaces `base`'s. New keys keep `over`'s order after `base`'s."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _read(path: Path) -> dict:
    if not path.exists():
        raise ConfigError(f"{path}: config file not found")
    try:
        tree = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys")
    return tree


def _base_path(name: str, where: Path) -> Path:
    """`extends:` names a preset or a YAML file (relative to the file that names it)."""
    if name in PRESETS:
        return PRESETS[name]
    path = Path(name) if Path(name).is_absolute() else where.parent / name
    if not path.exists():
        raise ConfigError(f"{where}: extends: {name!r} is neither a preset ({', '.join(PRESETS)}) "
                          "nor a config file")
    return path


def read_tree(path: Path, base: str | None = None, seen: tuple[Path, ...] = ()) -> dict:
    """The config tree of `path` with what it `extends:` (or `base`, the --preset beside a
    config file) merged underneath it."""
    tree = _read(path)
    extends = tree.pop("extends", None)
    if extends is not None and not isinstance(extends, str):
        raise ConfigError(f"{path}: extends: give a preset name or a config file path")
    if base and extends and extends != base:
        raise ConfigError(f"{path}: extends: {extends!r}, but --preset {base}: give one")
    extends = extends or base
    if not extends:
        return tree
    parent = _base_path(extends, path)
    if parent.resolve() in seen + (path.resolve(),):
        raise ConfigError(f"{path}: extends: {extends!r} extends it back (a cycle)")
    return merge(read_tree(parent, seen=seen + (path.resolve(),)), tree)


def load(path: str | Path | None = None, preset: str | None = None,
         overrides: list[str] | None = None) -> RunConfig:
    """Load a config file or preset (default: the `default` preset) and apply overrides. A
    config file may start from a preset or another file (`extends: default`); a preset given
    beside a config file is the one it extends."""
    if preset and preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; choose from {sorted(PRESETS)}")
    if path is None:
        path = PRESETS[preset or "default"]
        preset = None
    path = Path(path)
    tree = read_tree(path, preset)
    tree = copy.deepcopy(tree)
    for item in overrides or []:
        if "=" not in item:
            raise ConfigError(f"override {item!r}: write key.path=value")
        _set(tree, *item.split("=", 1))
    try:
        return RunConfig.model_validate(tree)
    except ValidationError as err:
        lines = []
        for e in err.errors():
            key = ".".join(str(p) for p in e["loc"]) or "(top level)"
            msg = e["msg"].replace("Extra inputs are not permitted", "unknown key")
            msg = msg.removeprefix("Value error, ")
            named = msg.startswith(key + ".") or msg.startswith(key + ":")  # names its key
            lines.append(f"{path}: {msg}" if named else f"{path}: {key}: {msg}")
        raise ConfigError("\n".join(lines)) from None


def dump(cfg: RunConfig) -> str:
    """The config as YAML with every key, each round's own recipe keys included (rounds are
    typed as the base settings class, so they dump as their actual class): `load` of the
    result plans the same run."""
    return yaml.safe_dump(cfg.model_dump(mode="json", serialize_as_any=True), sort_keys=False)
