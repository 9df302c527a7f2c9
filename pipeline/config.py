"""Run configuration: YAML -> validated, typed settings. Unknown keys and wrong types fail before
any work starts, naming the file and the key.

Precedence: built-in defaults < preset/config file < `key.path=value` overrides on the CLI.
"""
from __future__ import annotations

import copy
from pathlib import Path

import yaml
from pydantic import (Field, ValidationError, ValidationInfo,
                      field_validator)

from engine.sampling.settings import SamplerSettings
from engine.settings import ConfigError, Strict
from export.settings import ExportSettings
from gates.settings import CanarySettings, GateSettings
from pipeline import recipes
from pipeline.recipes import BFCL_PREFIX, CANARIES, RoundSettings

CONFIG_DIR = Path(__file__).with_name("configs")
PRESETS = {p.stem: p for p in sorted(CONFIG_DIR.glob("*.yaml"))}


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
