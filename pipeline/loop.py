"""The round loop: for each round, its recipe, then the uniform tail gate -> promote -> export.

Resumable at step granularity (see `pipeline.runstore`); one process per run directory.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

from data import filters
from pipeline import models
from pipeline.config import ROUND_NAMES, RunConfig, dump
from pipeline.runstore import RunStore

log = logging.getLogger("toolsmith")


class GateFailed(RuntimeError):
    pass


def _backend_name(cfg: RunConfig) -> str:
    from pipeline.sampling import default_backend
    return default_backend() if cfg.sampler.backend == "auto" else cfg.sampler.backend


def backend_opener(cfg: RunConfig):
    @contextmanager
    def open_backend(model_dir: Path):
        from pipeline.sampling import make_backend
        backend = make_backend(_backend_name(cfg), model_dir, **cfg.sampler.options)
        try:
            yield backend
        finally:
            backend.close()
    return open_backend


def suites_for(cfg: RunConfig):
    from gates.canaries import build_suites, bfcl_suite, gsm8k_suite
    suites = build_suites(cfg.canaries.sizes, cfg.canaries.version)
    for f in cfg.canaries.files:
        p = Path(f)
        suites.append(gsm8k_suite(p.stem, p) if "gsm" in p.name.lower() else bfcl_suite(p.stem, p))
    return suites


def evaluate_model(cfg: RunConfig, model_dir: Path, out_dir: Path, suites, progress=True,
                   meta=None) -> dict:
    from gates.evaluate import evaluate, finished
    from pipeline.sampling.base import SamplingParams
    c = cfg.canaries
    params = SamplingParams(temperature=c.temperature, top_p=1.0 if c.temperature == 0 else 0.95,
                            max_tokens=c.max_new_tokens)
    done = finished(suites, k=c.k, params=params, out_dir=out_dir,
                    max_context_tokens=cfg.sampler.max_context_tokens)
    if done is not None:  # the baseline is evaluated once per promoted model: no engine start
        return done.to_dict()
    with backend_opener(cfg)(model_dir) as backend:
        res = evaluate(backend, suites, k=c.k, params=params, out_dir=out_dir,
                       max_context_tokens=cfg.sampler.max_context_tokens, progress=progress,
                       meta={"model": str(model_dir), **(meta or {})})
    return res.to_dict()


def thresholds(cfg: RunConfig):
    from gates.promote import Thresholds
    g = cfg.gate
    base = Thresholds()
    return Thresholds(keep_se=g.keep_se, drop_se=g.drop_se,
                      drop_abs={**base.drop_abs, **g.drop_abs}, floors=dict(g.floors),
                      relaxed=g.relaxed, allow_tie=g.allow_tie)


def _attach_log(path: Path) -> logging.Handler:
    h = logging.FileHandler(path)
    h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logging.getLogger().addHandler(h)
    return h


def publish_export(store: RunStore, export_dir: Path, quant: str, system: str | None) -> Path:
    """Mirror the promoted export at a stable path, `runs/<name>/export/`, which the
    repository's top-level Modelfile points at."""
    from export.modelfile import write_modelfile
    src = export_dir / f"model-{quant}.gguf"
    dst_dir = store.root / "export"
    dst_dir.mkdir(parents=True, exist_ok=True)
    dst = dst_dir / src.name
    tmp = dst.with_name(dst.name + ".tmp")
    if tmp.exists():
        tmp.unlink()
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copy2(src, tmp)
    os.replace(tmp, dst)
    write_modelfile(dst_dir / "Modelfile", dst, system=system)
    return dst


def run(cfg: RunConfig, only_round: int | None = None, from_model: str | None = None,
        force: bool = False, progress: bool = True) -> dict:
    """Run every round not yet done (or only `only_round`). Returns the run's summary."""
    from gates.html import write_run_report
    from gates.promote import decide
    from gates.report import write_gate_report
    from rounds import RECIPES
    from rounds.common import NothingAccepted, RoundContext

    store = RunStore(cfg.directory())
    store.lock()
    try:
        (store.root / "run.yaml").write_text(dump(cfg))
        base = models.resolve(cfg.model)
        promoted = store.promoted()
        if promoted is None:
            promoted = {"round": 0, "name": "base", "model": str(base),
                        "eval_dir": str(store.root / "evals" / "base")}
        suites = suites_for(cfg)
        from gates.canaries import canary_prompts
        decon = filters.Decontaminator(canary_prompts(suites))
        summary = {}
        for number, name in enumerate(ROUND_NAMES, 1):
            rs = cfg.rounds[name]
            if only_round is not None and number != only_round:
                continue
            if not rs.enabled:
                log.info("round %d %s: disabled in config", number, name)
                continue
            status = store.round_status(number)
            if status in ("promoted", "rejected"):
                log.info("round %d %s: already %s", number, name, status)
                summary[name] = status
                continue
            start_model = Path(from_model) if (from_model and only_round) else Path(promoted["model"])
            rdir = store.round_dir(number)
            handler = _attach_log(rdir / "log.txt")
            t0 = time.perf_counter()
            try:
                log.info("round %d %s: starting from %s", number, name, start_model)
                ctx = RoundContext(cfg=cfg, settings=rs, store=store, number=number, name=name,
                                   start_model=start_model, decontaminator=decon,
                                   open_backend=backend_opener(cfg), progress=progress)
                try:
                    cand = RECIPES[name](ctx)
                except NothingAccepted as err:
                    wall = round(time.perf_counter() - t0, 1)
                    store.set_round_status(number, "rejected", wall_s=wall, reasons=[str(err)],
                                           stats=ctx.stats)
                    summary[name] = "rejected"
                    log.warning("round %d %s: not promoted: %s", number, name, err)
                    if cfg.gate.on_fail == "stop":
                        raise GateFailed(f"round {number} ({name}): {err}") from None
                    continue
                log.info("round %d %s: recipe done in %.0f s", number, name, time.perf_counter() - t0)
                # ---- uniform tail: gate -> promote -> export
                t_gate = time.perf_counter()
                base_eval = evaluate_model(cfg, Path(promoted["model"]),
                                           Path(promoted["eval_dir"]), suites, progress,
                                           meta={"role": "baseline", "round": promoted["round"]})
                cand_dir = rdir / "gate" / "candidate"
                cand_eval = evaluate_model(cfg, cand.model_dir, cand_dir, suites, progress,
                                           meta={"role": "candidate", "round": number})
                decision = decide(cand_eval, base_eval, thresholds(cfg), rs.target, force=force)
                log.info("round %d %s: gate evaluated in %.0f s: %s", number, name,
                         time.perf_counter() - t_gate, "pass" if decision.passed else "FAIL")
                meta = {"round": number, "name": name, "target": rs.target,
                        "baseline_model": promoted["model"], "candidate_model": str(cand.model_dir),
                        "relaxed": cfg.gate.relaxed, "forced": force,
                        "wall_s": round(time.perf_counter() - t0, 1)}
                write_gate_report(rdir / "gate", decision, cand_eval, base_eval, meta)
                store.mark(number, "gate", {"promote": decision.promote})
                reasons = [r.detail for r in decision.rules if not r.passed]
                export_info = None
                if decision.promote and cfg.export.enabled:
                    from export import ExportError, export_model
                    t_exp = time.perf_counter()
                    try:
                        export_info = export_model(
                            cand.model_dir, rdir / "export", cfg.export.quant,
                            load_check=cfg.export.load_check,
                            check_items=cfg.export.check_items,
                            min_agreement=cfg.export.min_agreement, system=cfg.export.system,
                            check_max_tokens=cfg.export.check_max_tokens)
                        store.mark(number, "export", {"ok": True})
                        log.info("round %d %s: exported in %.0f s", number, name,
                                 time.perf_counter() - t_exp)
                    except ExportError as err:
                        reasons.append(f"export failed: {err}")
                        decision_ok = False
                    else:
                        decision_ok = True
                else:
                    decision_ok = decision.promote
                wall = round(time.perf_counter() - t0, 1)
                if decision_ok:
                    promoted = {"round": number, "name": name, "model": str(cand.model_dir),
                                "eval_dir": str(cand_dir), "forced": decision.forced,
                                "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
                    store.promote(promoted)
                    if export_info is not None:
                        publish_export(store, rdir / "export", cfg.export.quant, cfg.export.system)
                    store.set_round_status(number, "promoted", wall_s=wall, stats=ctx.stats)
                    log.info("round %d %s: promoted (%.0f s)", number, name, wall)
                    summary[name] = "promoted"
                else:
                    store.set_round_status(number, "rejected", wall_s=wall, reasons=reasons,
                                           stats=ctx.stats)
                    summary[name] = "rejected"
                    log.warning("round %d %s: not promoted: %s", number, name, "; ".join(reasons))
                    if cfg.gate.on_fail == "stop":
                        write_run_report(store.root)
                        raise GateFailed(f"round {number} ({name}) failed its gate: "
                                         + "; ".join(reasons) + f" (see {rdir / 'gate' / 'report.md'})")
                write_run_report(store.root)
            finally:
                logging.getLogger().removeHandler(handler)
                handler.close()
        return summary
    finally:
        store.unlock()
