"""What `pipeline run` checks before it writes anything to a run directory.

The config was validated when it loaded (keys, types, ranges, task and teacher files); here
the things it names: the base model (a model reference or a directory holding `config.json`
and `*.safetensors`), a `--from` model, the sampler's support for the model, and every canary
file, read in full. A failed start leaves an existing run's `run.yaml` and state as they were.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from data.jsonl import DataError
from gates.canaries import Suite
from gates.gate import suites_for
from engine import models
from pipeline.config import ConfigError, RunConfig
from engine.sampling import default_backend
from engine.sampling.vllm_backend import unsupported_on_cpu


@dataclass(frozen=True)
class Inputs:
    """What a run starts from, resolved and checked: the base model, the `--from` model of a
    single round (None: the promoted one) and every canary suite at its largest size."""
    base: Path
    start: Path | None
    suites: list[Suite]


def check_inputs(cfg: RunConfig, from_model: str | None = None) -> Inputs:
    """The run's inputs, or ConfigError naming the key (or flag), the path and what to do."""
    base = model_dir(cfg, cfg.model, "model")
    start = model_dir(cfg, from_model, "--from") if from_model else None
    for i, f in enumerate(cfg.canaries.files):
        if not Path(f).is_file():
            raise ConfigError(f"canaries.files[{i}]: {f}: file not found; fix the path or "
                              "drop the entry")
    try:
        suites = suites_for(cfg, cfg.canaries.largest_sizes(cfg.rounds.values()))
    except DataError as err:
        raise ConfigError(f"canaries.files: {err}") from None
    return Inputs(base, start, suites)


def model_dir(cfg: RunConfig, ref: str, key: str) -> Path:
    """`ref` resolved to a model directory the configured sampler can run."""
    try:
        path = models.resolve(ref)
    except (FileNotFoundError, ValueError) as err:
        raise ConfigError(f"{key}: {err}") from None
    if not any(path.glob("*.safetensors")):
        raise ConfigError(f"{key}: {path}: no *.safetensors weights there (only safetensors "
                          "are loaded); save the model with save_pretrained(dir, "
                          "safe_serialization=True)")
    backend = default_backend() if cfg.sampler.backend == "auto" else cfg.sampler.backend
    reason = unsupported_on_cpu(path) if backend == "vllm" else None
    if reason:
        raise ConfigError(f"{key}: {reason}")
    return path
