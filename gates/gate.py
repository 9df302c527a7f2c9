"""A round's gate: the run's canary suites, one model's evaluation on them, and the gate step
(baseline and candidate evaluated on the same suites -> the promote decision -> report).

The baseline's evaluation is reused from its own directory once it exists, so each promoted
model is evaluated once however many rounds it gates.
"""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from engine import timing
from .settings import GateSettings

RunConfig = Any  # the run config (pipeline.config.RunConfig): canaries, sampler, gate, rounds
from engine.sampling import backend_opener
from engine.sampling.base import SamplingParams

from . import bfcl_canary
from .canaries import LONG_CONTEXT_TOKENS, Suite, bfcl_suite, build_suites, gsm8k_suite
from .evaluate import (EVAL_FILE, SEED_ROUND, External, evaluate, external_todo, finished,
                       load_eval, missing_rollouts, previous_eval)
from .promote import Decision, decide
from .report import write_gate_report

log = logging.getLogger("toolsmith")


@dataclass(frozen=True)
class GateResult:
    """What a round's gate hands the loop."""
    decision: Decision
    candidate_eval: Path     # the candidate's evaluation (the next baseline's, if promoted)
    report: Path             # report.md beside report.json

    @property
    def reasons(self) -> list[str]:
        """The failed rules, in words."""
        return [r.detail for r in self.decision.failures()]


def suites_for(cfg: RunConfig, sizes: dict[str, int] | None = None) -> list[Suite]:
    """The built-in canaries at `sizes` (default: the configured `canaries.sizes`; a round's
    gate: `cfg.canaries.sizes_for(rs)`), plus each extra BFCL / GSM8K file. (BFCL categories
    as canaries, `canaries.bfcl`, are scored by BFCL's own checkers, not the rollout driver:
    `bfcl_external`.)"""
    suites = build_suites(cfg.canaries.sizes if sizes is None else sizes, cfg.canaries.version,
                          context_tokens=long_context_lengths(cfg))
    for f in cfg.canaries.files:
        p = Path(f)
        suites.append(gsm8k_suite(p.stem, p) if "gsm" in p.name.lower() else bfcl_suite(p.stem, p))
    return suites


def long_context_lengths(cfg: RunConfig) -> list[int]:
    """The long_context canary's lengths: the `context_tokens` of the run's first round that
    has them (the long-context round), else the built-in default."""
    for rs in cfg.rounds.values():
        if getattr(rs, "context_tokens", None):
            return list(rs.context_tokens)
    return list(LONG_CONTEXT_TOKENS)


def bfcl_external(cfg: RunConfig, params: SamplingParams) -> External | None:
    """The configured BFCL canaries (`canaries.bfcl`) as external suites of an evaluation:
    their hashes now (reading items is cheap; no engine), played later on the same backend
    with the same sampling settings and seed round as the built-in canaries."""
    c = cfg.canaries
    if not c.bfcl:
        return None
    hashes = {bfcl_canary.suite_name(cat): bfcl_canary.suite_hash(
                  cat, bfcl_canary.canary_items(cat, n, c.version))
              for cat, n in c.bfcl.items()}

    def run(backend, names: list[str]) -> dict[str, dict]:
        t0 = time.perf_counter()
        out = bfcl_canary.evaluate_canaries(
            backend, {cat: n for cat, n in c.bfcl.items() if bfcl_canary.suite_name(cat) in names},
            k=c.k, params=params,
            max_context_tokens=cfg.sampler.max_context_tokens, version_tag=c.version,
            seed=SEED_ROUND)
        log.info("BFCL canaries evaluated in %.0f s: %s", time.perf_counter() - t0,
                 ", ".join(f"{n} {s['metrics']['accuracy']:.3f}" for n, s in out.items()))
        return out
    return External(hashes, run)


def evaluate_model(cfg: RunConfig, model_dir: Path, out_dir: Path, suites: list[Suite],
                   progress: bool = True, meta: dict | None = None,
                   open_backend: Callable | None = None) -> dict:
    """`model_dir` evaluated on `suites` and the configured BFCL canaries with the canary
    sampling settings, written to `out_dir`; a finished evaluation there with the same
    settings and suites (BFCL hashes included) is returned as it is. One backend serves all
    suites; `open_backend` (default: the configured sampler's) opens it on `model_dir`."""
    c = cfg.canaries
    params = SamplingParams(temperature=c.temperature, top_p=1.0 if c.temperature == 0 else 0.95,
                            max_tokens=c.max_new_tokens)
    external = bfcl_external(cfg, params)
    done = finished(suites, k=c.k, params=params, out_dir=out_dir,
                    max_context_tokens=cfg.sampler.max_context_tokens,
                    external=external.hashes if external else None)
    if done is not None:  # no engine start
        return done.to_dict()
    opener = open_backend or backend_opener(cfg.sampler)
    if not missing_rollouts(suites, k=c.k, params=params, out_dir=out_dir,
                            max_context_tokens=cfg.sampler.max_context_tokens) and \
            not external_todo(external, previous_eval(out_dir)):
        opener = _from_disk   # every item already rolled out with these settings
    with opener(model_dir) as backend:
        res = evaluate(backend, suites, k=c.k, params=params, out_dir=out_dir,
                       max_context_tokens=cfg.sampler.max_context_tokens, progress=progress,
                       meta={"model": str(model_dir), **(meta or {})}, reuse=False,
                       external=external)
    return res.to_dict()


class _NoEngine:
    """The backend of an evaluation scored from disk: it must never be asked to generate."""
    name = "from-disk"
    tokenizer = None

    def generate(self, *args, **kwargs):
        raise RuntimeError("an evaluation scored from disk asked for new samples")


@contextmanager
def _from_disk(model_dir: Path):
    log.info("evaluation of %s: every item already rolled out; scored from disk", model_dir)
    yield _NoEngine()


def evaluate_baseline(cfg: RunConfig, suites: list[Suite], baseline: dict,
                      progress: bool = True) -> dict:
    """The promoted model's evaluation (`baseline`: round, model, eval_dir), timed as the
    `gate_baseline` step; ~0 s when its evaluation is already on disk."""
    with timing.section("gate_baseline"):
        return evaluate_model(cfg, Path(baseline["model"]), Path(baseline["eval_dir"]), suites,
                              progress, meta={"role": "baseline", "round": baseline["round"]})


def gate_round(cfg: RunConfig, suites: list[Suite], baseline: dict, candidate: Path,
               gate_dir: Path, *, round_no: int, name: str, target: str, started: float,
               force: bool = False, progress: bool = True,
               thresholds: GateSettings | None = None,
               base_eval_dir: Path | None = None) -> GateResult:
    """Gate round `round_no`'s `candidate` model against `baseline` (the promoted record:
    round, model, eval_dir) with `thresholds` (default `cfg.gate`; a round's own are
    `cfg.gate.for_round(settings)`) and the round's `target`; writes
    `gate_dir/report.{json,md}`. `started` (perf_counter) is when the round began.
    `base_eval_dir`: the base model's evaluation, for `gate.anchored` canaries."""
    thresholds = thresholds or cfg.gate
    t0 = time.perf_counter()
    base_eval = evaluate_baseline(cfg, suites, baseline, progress)
    cand_dir = gate_dir / "candidate"
    with timing.section("gate_candidate"):
        cand_eval = evaluate_model(cfg, candidate, cand_dir, suites, progress,
                                   meta={"role": "candidate", "round": round_no})
    anchor = (load_eval(base_eval_dir) if thresholds.anchored and base_eval_dir
              and (base_eval_dir / EVAL_FILE).exists() else None)
    decision = decide(cand_eval, base_eval, thresholds, target, force=force, anchor=anchor)
    log.info("round %d %s: gate evaluated in %.0f s: %s", round_no, name,
             time.perf_counter() - t0, "pass" if decision.passed else "FAIL")
    meta = {"round": round_no, "name": name, "target": target,
            "baseline_model": baseline["model"], "candidate_model": str(candidate),
            "relaxed": thresholds.relaxed, "forced": force,
            "wall_s": round(time.perf_counter() - started, 1)}
    _, md = write_gate_report(gate_dir, decision, cand_eval, base_eval, meta)
    return GateResult(decision, cand_dir, md)
