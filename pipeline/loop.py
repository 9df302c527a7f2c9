"""The round loop: each planned round runs its recipe, then the uniform tail
gate -> export -> promote or reject, one named step each.

Resumable at step granularity (see `engine.runstore`); one process per run directory.
Each round's time breakdown (seconds per step, engine starts, tokens/s; `engine.timing`)
goes to its `timing` entry in state.json as it runs. One sampler engine is kept alive across
steps that use the same model (`engine.sampling.keep_engines`) and closed when the run ends.
"""
from __future__ import annotations

import hashlib
import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from data import filters
from export import ExportError
from export.publish import export_round, publish_export
from gates.canaries import Suite
from gates.decontamination import decontaminator_for
from gates.gate import GateResult, gate_round, suites_for
from gates.gate import evaluate_baseline as evaluate_promoted
from gates.html import write_run_report
from data.jsonl import write_text_atomic
from engine import machine
from pipeline import recipes
from engine import timing
from pipeline.config import RunConfig, dump
from engine.runstore import RunStore
from engine.sampling import backend_opener, keep_engines
from pipeline.preflight import Inputs, check_inputs
from pipeline.redo import finish_redo
from rounds.common import Candidate, NothingAccepted, RoundContext

log = logging.getLogger("toolsmith")


class GateFailed(RuntimeError):
    """A round was not promoted and `gate.on_fail` is `stop`."""


@dataclass
class Run:
    """What the rounds of one `run()` share; `promoted` is the current best model's record."""
    cfg: RunConfig
    store: RunStore
    suites: list[Suite]      # every canary at its largest size over the rounds
    decontaminator: filters.Decontaminator
    promoted: dict
    force: bool
    progress: bool


@dataclass(frozen=True)
class Verdict:
    """A round's outcome after gate and export: promote or not, the reasons against (failed
    rules, a failed export), and the export to publish on promotion (None: nothing exported)."""
    promote: bool
    reasons: list[str]
    export_dir: Path | None = None


def run(cfg: RunConfig, only_round: int | None = None, from_model: str | None = None,
        force: bool = False, progress: bool = True) -> dict:
    """Run every round not yet done (or only `only_round`, which `from_model` may start).
    Returns the run's summary: round name -> promoted / rejected."""
    store = RunStore(cfg.directory())
    inputs = check_inputs(cfg, from_model if only_round else None)  # before any write
    store.lock()
    try:
        finish_redo(store)  # a `--redo` killed while it dropped steps finishes first
        this_run = open_run(cfg, store, force, progress, inputs)
        start = inputs.start
        summary = {}
        with keep_engines() as engines:  # the last engine is closed however the run ends
            for number, name, rs in cfg.planned_rounds():
                if only_round is not None and number != only_round:
                    continue
                if not rs.enabled:
                    log.info("round %d %s: disabled in config", number, name)
                    continue
                status = store.round_status(number)
                if status in ("promoted", "rejected"):
                    log.info("round %d %s: already %s", number, name, status)
                else:
                    status = run_round(this_run, number, name, rs, start)
                summary[name] = status
            log.info("engines: %d started (%.0f s), %d reused", len(engines.starts),
                     sum(s["seconds"] for s in engines.starts), engines.reuses)
        return summary
    finally:
        store.unlock()


def open_run(cfg: RunConfig, store: RunStore, force: bool, progress: bool,
             inputs: Inputs | None = None) -> Run:
    """Record the config as run and the machine it runs on; finish a promotion a kill cut
    short; the promoted model so far (the base model at first), the canary suites and the
    decontaminator built from every evaluation prompt (canaries, canary files, BFCL).
    `inputs`: the checked model and suites (default: checked here, before any write)."""
    inputs = inputs or check_inputs(cfg)
    write_text_atomic(store.root / "run.yaml", dump(cfg))
    store.record_machine(machine.describe())
    publish_promotion(store, cfg)
    promoted = store.promoted() or {"round": 0, "name": "base", "model": str(inputs.base),
                                    "eval_dir": str(store.root / "evals" / "base")}
    suites = inputs.suites
    return Run(cfg, store, suites, decontaminator_for(suites), promoted, force, progress)


def round_suites(run: Run, rs: recipes.RoundSettings) -> list[Suite]:
    """The canary suites of a round's gate: `canaries.sizes` with the round's `canaries`
    sizes over them."""
    return suites_for(run.cfg, run.cfg.canaries.sizes_for(rs))


def run_round(run: Run, number: int, name: str, rs: recipes.RoundSettings,
              start_model: Path | None) -> str:
    """One round, logged to its log.txt: the recipe, then gate -> export -> promote or
    reject. `start_model` defaults to the promoted model. Returns the round's status."""
    timer = timing.StepTimer.load(run.store.round_timing(number),
                                  on_change=lambda t: run.store.set_round_timing(number, t))
    with round_log(run.store.round_dir(number, name) / "log.txt"), timer.running():
        t0 = time.perf_counter()
        ctx = RoundContext(cfg=run.cfg, settings=rs, store=run.store, number=number, name=name,
                           start_model=start_model or Path(run.promoted["model"]),
                           decontaminator=run.decontaminator,
                           open_backend=backend_opener(run.cfg.sampler), progress=run.progress)
        suites = round_suites(run, rs)
        baseline = run.promoted if start_model is None else from_record(run, start_model)
        evaluate_baseline(run, suites, baseline)
        cand = run_recipe(run, ctx, t0)
        if cand is None:
            return "rejected"
        gate = gate_round(run.cfg, suites, baseline, cand.model_dir, ctx.dir / "gate",
                          round_no=number, name=name, target=rs.target, started=t0,
                          force=run.force, progress=run.progress,
                          thresholds=run.cfg.gate.for_round(rs),
                          base_eval_dir=run.store.root / "evals" / "base")
        run.store.mark(number, "gate", {"promote": gate.decision.promote})
        verdict = export_promoted(run.cfg, ctx, cand.model_dir, gate)
        status = promote_or_reject(run, ctx, t0, cand, gate, verdict)
        write_run_report(run.store.root)
        if status == "rejected":
            stop_if_configured(run.cfg, f"round {number} ({name}) failed its gate: "
                               + "; ".join(verdict.reasons) + f" (see {gate.report})")
        return status


def from_record(run: Run, model: Path) -> dict:
    """The baseline of a round started `--from` a model: that model, evaluated into its own
    directory (one per model path), since the round's candidate must beat what it started
    from."""
    if str(model) == run.promoted["model"]:
        return run.promoted
    tag = hashlib.sha1(str(Path(model).resolve()).encode()).hexdigest()[:10]
    return {"round": run.promoted["round"], "name": f"from {model}", "model": str(model),
            "eval_dir": str(run.store.root / "evals" / f"from-{tag}")}


def evaluate_baseline(run: Run, suites: list[Suite], baseline: dict) -> None:
    """The gate's baseline evaluation, done before the recipe: the engine it starts is the one
    the recipe then samples from (kept alive; closed before training), so a baseline not yet
    evaluated (the base model in round 1) costs no second engine start. The gate finds the
    evaluation on disk and reuses it."""
    evaluate_promoted(run.cfg, suites, baseline, run.progress)


@contextmanager
def round_log(path: Path):
    """Everything logged inside also goes to `path` (a round's log.txt)."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logging.getLogger().addHandler(handler)
    try:
        yield
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()


def run_recipe(run: Run, ctx: RoundContext, t0: float) -> Candidate | None:
    """The round's recipe; when it accepted nothing the round is rejected and None returned."""
    log.info("round %d %s: starting from %s", ctx.number, ctx.name, ctx.start_model)
    try:
        cand = recipes.resolve(ctx.settings.recipe or ctx.name).run(ctx)
    except NothingAccepted as err:
        reject(run, ctx, t0, [str(err)])
        stop_if_configured(run.cfg, f"round {ctx.number} ({ctx.name}): {err}")
        return None
    log.info("round %d %s: recipe done in %.0f s", ctx.number, ctx.name, time.perf_counter() - t0)
    return cand


def export_promoted(cfg: RunConfig, ctx: RoundContext, model_dir: Path,
                    gate: GateResult) -> Verdict:
    """Export the candidate the gate promotes (when export is on); a failed export turns the
    promotion into a rejection."""
    if not (gate.decision.promote and cfg.export.enabled):
        return Verdict(gate.decision.promote, gate.reasons)
    t0, out = time.perf_counter(), ctx.dir / "export"
    try:
        with timing.section("export"):  # the load check inside is its own step
            export_round(cfg.export, model_dir, out)
    except ExportError as err:
        return Verdict(False, gate.reasons + [f"export failed: {err}"])
    ctx.store.mark(ctx.number, "export", {"ok": True})
    log.info("round %d %s: exported in %.0f s", ctx.number, ctx.name, time.perf_counter() - t0)
    return Verdict(True, gate.reasons, export_dir=out)


def promote_or_reject(run: Run, ctx: RoundContext, t0: float, cand: Candidate,
                      gate: GateResult, verdict: Verdict) -> str:
    """Promote the candidate, publishing its export, or reject the round, as `verdict` says.
    Returns the round's status."""
    if not verdict.promote:
        reject(run, ctx, t0, verdict.reasons)
        return "rejected"
    wall = round(time.perf_counter() - t0, 1)
    run.promoted = {"round": ctx.number, "name": ctx.name, "model": str(cand.model_dir),
                    "eval_dir": str(gate.candidate_eval), "forced": gate.decision.forced,
                    "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    run.store.commit_promotion(ctx.number, run.promoted, verdict.export_dir, wall_s=wall,
                               stats=ctx.stats)  # one atomic write: the promotion happened
    publish_promotion(run.store, run.cfg)
    log.info("round %d %s: promoted (%.0f s)", ctx.number, ctx.name, wall)
    return "promoted"


def publish_promotion(store: RunStore, cfg: RunConfig) -> None:
    """promoted.json and the export mirror of the committed promotion, if not yet written
    (a resumed run finishes what a kill cut short; redoing it is harmless)."""
    pending = store.pending_promotion()
    if pending is None:
        return
    store.promote(pending["record"])
    if pending.get("export_dir"):
        publish_export(store, Path(pending["export_dir"]), cfg.export.quant, cfg.export.system)
    store.promotion_published()


def reject(run: Run, ctx: RoundContext, t0: float, reasons: list[str]) -> None:
    """Record the round as rejected, with why."""
    run.store.set_round_status(ctx.number, "rejected", wall_s=round(time.perf_counter() - t0, 1),
                               reasons=reasons, stats=ctx.stats)
    log.warning("round %d %s: not promoted: %s", ctx.number, ctx.name, "; ".join(reasons))


def stop_if_configured(cfg: RunConfig, message: str) -> None:
    """Raise `GateFailed(message)` when a rejected round stops the run (`gate.on_fail: stop`)."""
    if cfg.gate.on_fail == "stop":
        raise GateFailed(message) from None
