"""`pipeline`: run the five gated rounds, inspect runs, evaluate, export, chat, benchmark."""
from __future__ import annotations

import argparse
import errno
import json
import shlex
import sys
from pathlib import Path

DETECT = 0.10  # --dry-run warns when a round's target cannot detect a change this large

BENCHES = {"rollout": "pipeline.bench.rollout", "train": "pipeline.bench.train",
           "verify": "pipeline.bench.verifier", "filters": "pipeline.bench.filters",
           "run": "pipeline.bench.run", "lora": "pipeline.bench.lora"}


def _config(args):
    """The config of `pipeline run`: a YAML file or preset with overrides, or a run directory
    given as the positional, whose `run.yaml` (the config it ran with) is read back, with
    overrides over it."""
    from pipeline import config
    overrides = list(args.overrides or [])
    path = args.config
    if path and Path(path).is_dir():  # a run directory: its recorded config
        if args.run_dir or args.preset:
            raise config.ConfigError(f"{path} is a run directory: give it alone, without "
                                     "--run-dir or --preset")
        if not (Path(path) / "run.yaml").exists():
            raise config.ConfigError(f"{path}: no run.yaml here (not a run directory); give "
                                     "a config file or --preset with --run-dir")
        return config.load(Path(path) / "run.yaml", None, [f"run_dir={path}", *overrides])
    if args.run_dir:
        overrides.append(f"run_dir={args.run_dir}")
    return config.load(path, args.preset, overrides)


def cmd_run(args) -> int:
    from gates.stats import items_for, keep_mde
    from pipeline.config import dump
    from pipeline.loop import GateFailed, run
    from engine.runstore import RunStore
    cfg = _config(args)  # a bad config fails here, before any work
    if args.round is not None and not 1 <= args.round <= len(cfg.rounds):
        raise SystemExit(f"--round takes 1..{len(cfg.rounds)} (the rounds of this config)")
    if args.redo and args.round is None:
        raise SystemExit("--redo needs --round N: the round whose step to redo")
    if args.redo and not args.dry_run:
        start_redo(cfg, args.round, args.redo, list(args.overrides or []))
    if args.dry_run:
        print(dump(cfg))
        store_dir = cfg.directory()
        state = RunStore(store_dir).state() if (store_dir / "state.json").exists() else {"rounds": {}}
        print(f"plan for {store_dir}:")
        for n, name, rs in cfg.planned_rounds():
            if args.round and n != args.round:
                continue
            st = state["rounds"].get(str(n), {})
            done = ",".join(st.get("done", {})) or "-"
            what = training_plan(rs)
            items, keep_se = cfg.canaries.size(rs.target, rs), cfg.gate.keep_se
            mde = keep_mde(items, keep_se)
            print(f"  {n} {name:<13} {'on ' if rs.enabled else 'off'} tasks={sum(rs.tasks.values()):<4}"
                  f" {what:<24} target={rs.target:<12} n={items:<4} keep MDE={mde:.3f}"
                  f" status={st.get('status', 'pending')} done={done}")
            if rs.enabled and mde > DETECT:
                print(f"    WARNING: target {rs.target} has {items} items: keep MDE {mde:.3f} at "
                      f"keep_se {keep_se:g} (80% power) cannot detect a +{DETECT:.2f} change; "
                      f"about {items_for(DETECT, keep_se)} items would")
        return 0
    try:
        summary = run(cfg, only_round=args.round, from_model=args.from_model, force=args.force,
                      progress=not args.no_progress)
    except GateFailed as err:
        print(f"stopped: {err}", file=sys.stderr)
        return 3
    print(json.dumps(summary, indent=1))
    from gates.report import summary_table
    print(summary_table(cfg.directory()))
    return 0


def start_redo(cfg, round_no: int, step: str, overrides: list[str]) -> None:
    """Drop `step` of round `round_no` and everything after it (`pipeline.redo`), under the
    run's lock, and say what was dropped."""
    from pipeline.redo import plan, start_redo as drop
    from engine.runstore import RunStore
    if not (cfg.directory() / "state.json").exists():
        raise FileNotFoundError(f"{cfg.directory()}: no run here (no state.json) to redo a "
                                "step of")
    from data.jsonl import write_text_atomic
    from pipeline.config import dump
    store = RunStore(cfg.directory())
    store.lock()
    try:
        plan(store, round_no, step)  # no such round or step: an error before anything changes
        # the config with the overrides next: a resume after a kill reruns with them
        write_text_atomic(store.root / "run.yaml", dump(cfg))
        redo = drop(store, round_no, step, overrides, cfg.export.quant, cfg.export.system)
    finally:
        store.unlock()
    later = f"; rounds {redo['later_rounds']} dropped" if redo["later_rounds"] else ""
    back = (f"; promoted.json back to round {redo['promoted']['round']}" if redo["promoted"]
            else "; promoted.json back to the base model") if redo["rollback"] else ""
    print(f"redo round {round_no}: dropped {', '.join(redo['dropped'])}{later}{back}",
          file=sys.stderr)


def training_plan(rs) -> str:
    """How a round trains, in a few words: `SFT k=2`, `SFT pool k 2-6` (a pass-rate-aware
    pool) or `GRPO 16x2x4 probe k=4` (steps x tasks x group, the frontier probe)."""
    if hasattr(rs, "grpo"):
        g, f = rs.grpo, getattr(rs, "frontier", None)
        probe = f" probe k={f.probe_k or g.group_size}" if f is not None and f.enabled else ""
        return f"GRPO {g.max_steps}x{g.tasks_per_step}x{g.group_size}{probe}"
    pool = getattr(rs, "pool", None)
    if pool is not None:
        return f"SFT pool k {pool.k_probe}-{pool.k_max}"
    return f"SFT k={getattr(rs, 'k', 1)}"


def cmd_status(args) -> int:
    from pipeline.status import status_text
    print(status_text(Path(args.run)))
    return 0


def cmd_report(args) -> int:
    from gates.html import write_run_report
    from gates.report import detail_table, final_vs_base_table, machine_lines, summary_table
    print(summary_table(Path(args.run)))
    for line in machine_lines(Path(args.run)):
        print(line)
    detail = detail_table(Path(args.run))
    if detail:
        print("\ngates in detail:\n" + detail)
    final = final_vs_base_table(Path(args.run))
    if final:
        print("\n" + final)
    print(f"html: {write_run_report(Path(args.run))}")
    if args.markdown:
        from data.jsonl import write_text_atomic
        from gates.run_markdown import run_markdown
        command = shlex.join(["pipeline", "report", args.run, "--markdown", args.markdown]
                             + (["--title", args.title] if args.title else [])
                             + (["--note", args.note] if args.note else []))
        write_text_atomic(Path(args.markdown), run_markdown(Path(args.run), command,
                                                            args.title, args.note))
        print(f"written: {args.markdown}")
    return 0


def cmd_fork(args) -> int:
    from pipeline.fork import ForkError, fork
    try:
        info = fork(Path(args.run), Path(args.new))
    except ForkError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"forked {info['from']} -> {info['to']}: {info['rewritten_files']} file(s) with paths "
          f"rewritten, {info['linked_files']} weight file(s) hard-linked")
    return 0


def cmd_compare(args) -> int:
    from gates.compare import CompareError, compare, markdown, text
    try:
        result = compare(Path(args.run_a), Path(args.run_b), args.round)
    except CompareError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(text(result))
    if args.markdown:
        out = Path(args.markdown)
        out.parent.mkdir(parents=True, exist_ok=True)
        command = (f"pipeline compare {args.run_a} {args.run_b}"
                   + (f" --round {args.round}" if args.round else "")
                   + f" --markdown {args.markdown}")
        out.write_text(markdown(result, command))
        print(f"written: {out}")
    return 0


def cmd_eval(args) -> int:
    from gates.gate import evaluate_model, suites_for
    from engine import models
    from pipeline import config
    from pipeline.recipes import BFCL_PREFIX
    from pipeline.preflight import model_dir
    overrides = [f"sampler.backend={args.backend}"] if args.backend else []
    cfg = config.load(args.config, args.preset, overrides + list(args.overrides or []))
    model_dir(cfg, args.model, "model")  # one the sampler can run, before an engine starts
    if args.bfcl:  # BFCL categories, scored by BFCL's own checkers (gates/bfcl.py)
        from gates.bfcl import evaluate_model_bfcl
        from gates.bfcl_report import format_report
        out = Path(args.out) / "bfcl"
        print(format_report(evaluate_model_bfcl(cfg, models.resolve(args.model), args.bfcl,
                                                limit=args.limit, seed=args.seed,
                                                out_dir=out)))
        print(f"written: {out}/report.json, report.md, <category>.jsonl")
        return 0
    if args.suite:
        wanted = args.suite.split(",")
        cfg.canaries.sizes = {k: v for k, v in cfg.canaries.sizes.items() if k in wanted}
        cfg.canaries.bfcl = {c: v for c, v in cfg.canaries.bfcl.items()
                             if BFCL_PREFIX + c in wanted}
    if args.k:
        cfg.canaries.k = args.k
    suites = suites_for(cfg)
    res = evaluate_model(cfg, models.resolve(args.model), Path(args.out), suites)
    width = max([12, *map(len, res["suites"])])
    for name, s in res["suites"].items():
        metrics = ", ".join(f"{m}={v:.3f}" for m, v in s["metrics"].items())
        print(f"{name:<{width}} n={s.get('n_items', '?'):<4} {metrics}")
    print(f"written: {Path(args.out) / 'eval.json'}")
    return 0


def cmd_export(args) -> int:
    from export import export_model
    from engine import models
    src = models.resolve(args.target)  # a run directory means its promoted model
    out = Path(args.out or (src.parent / "export"))
    info = export_model(src, out, args.quant, load_check=not args.no_load_check)
    print(json.dumps({k: v for k, v in info.items() if k != "load_check"}, indent=1, default=str))
    return 0


def cmd_chat(args) -> int:
    from export.chat import chat
    domains = args.domains.split(",") if args.domains else None
    if domains and not domain_checks(domains, {}):
        return 2
    chat(Path(args.model), prompt=args.prompt, tools_domains=domains, max_tokens=args.max_tokens)
    return 0


def cmd_bench(args) -> int:
    import importlib
    if args.name not in BENCHES:
        raise SystemExit(f"unknown benchmark {args.name!r}; choose from {', '.join(BENCHES)}")
    return importlib.import_module(BENCHES[args.name]).main(args.rest)


def cmd_config(args) -> int:
    from pipeline import config_reference as ref
    keys = ref.all_keys()
    print(ref.markdown(keys) if args.markdown else ref.text(keys), end="" if args.markdown else "\n")
    return 0


def cmd_tasks(args) -> int:
    from data import tasks
    domains = args.domains.split(",") if args.domains else None
    if (domains or "@" in args.kind) and not domain_checks(domains, {args.kind: args.n}):
        return 2
    for i in range(args.start, args.start + args.n):
        try:
            t = tasks.make(args.kind, i, split=args.split, context_tokens=args.context_tokens,
                           domains=args.domains.split(",") if args.domains else None)
        except ValueError as err:  # an unknown domain, or one that cannot make this kind
            print(f"error: {err}", file=sys.stderr)
            return 2
        if args.json:
            print(t.model_dump_json())
            continue
        names = [x["function"]["name"] for x in t.tools]
        print(f"[{t.id}] {t.domain}/{t.kind}  turns<={t.max_turns}  needs {t.min_calls} call(s)")
        print(f"  prompt : {t.prompt}")
        print(f"  tools  : {', '.join(names) if names else '(none)'}")
        if t.faults:
            print(f"  faults : {json.dumps({k: v for k, v in t.faults.items() if k != 'pad_chars'})}")
        print(f"  gold   : {', '.join(f'{g.name}({json.dumps(g.arguments)})' for g in t.gold_calls) or 'no call'}")
        print(f"  answer : {t.answer!r}")
    return 0


def domain_checks(domains: list[str] | None, tasks: dict[str, int]) -> bool:
    """The checks `run` makes on a round's domains (each resolves, a user domain's oracles
    score 1.0, some domain makes each task kind); False, with the error printed, on failure."""
    from rounds.settings import check_domains
    try:
        check_domains(domains, tasks)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return False
    return True


# A write the file system refused: the message says the run's state is intact.
WRITE_ERRORS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.EFBIG}


def write_error(err: OSError) -> str:
    where = f"{err.filename}: " if err.filename else ""
    return (f"error: cannot write {where}{err.strerror or err}. Nothing half-written was kept: "
            "every file goes to a temporary name and is renamed when complete, so a run's "
            "state (run.yaml, state.json, finished steps) is intact. Free disk space or make "
            "the directory writable, then run the same command again: a run resumes at its "
            "first unfinished step.")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="pipeline", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)

    def cfg_args(p):
        p.add_argument("config", nargs="?", help="run config YAML (default: the default "
                                                 "preset), or a run directory: the config "
                                                 "it ran with (its run.yaml)")
        p.add_argument("--preset", help="a shipped config: default, tiny (with CONFIG: the "
                                          "preset CONFIG extends)")
        p.add_argument("--run-dir", help="run directory (default runs/<name>)")
        p.add_argument("-o", "--set", dest="overrides", action="append", metavar="KEY=VALUE",
                       help="override a config key, e.g. -o rounds.grounding.k=2")

    p = sub.add_parser("run", help="run every round not yet done (resumable)")
    cfg_args(p)
    p.add_argument("--round", type=int, help="run only this round (1-5)")
    p.add_argument("--from", dest="from_model", help="with --round: start from this model dir")
    p.add_argument("--dry-run", action="store_true", help="validate the config, print the plan")
    p.add_argument("--redo", metavar="STEP", help="with --round N: drop STEP of round N "
                   "(e.g. train), the steps after it and later rounds, then rerun them; give "
                   "the run directory as the positional (pipeline run RUN --round 4 --redo "
                   "train -o rounds.self_improve.sft.seed=1)")
    p.add_argument("--force", action="store_true", help="promote even if the gate fails "
                                                        "(written into the report)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("-v", "--verbose", action="store_true", help="engine logs (vLLM, "
                   "transformers, warnings) on the console too, not only in each log.txt")
    p.set_defaults(fn=cmd_run)

    p = sub.add_parser("status", help="rounds, steps, counts, gate verdicts, promoted model")
    p.add_argument("run")
    p.set_defaults(fn=cmd_status)

    p = sub.add_parser("report", help="print the gate summary table and write report.html")
    p.add_argument("run")
    p.add_argument("--markdown", metavar="FILE", default=None,
                   help="also write the tables as markdown, with command, date and machine "
                        "(docs/results/<name>.md)")
    p.add_argument("--title", default=None, help="with --markdown: the page's title")
    p.add_argument("--note", default=None, help="with --markdown: how the run was made (what "
                                                "changed, whether the CPU was shared)")
    p.set_defaults(fn=cmd_report)

    p = sub.add_parser("fork", help="copy a run directory to a new one, paths rewritten "
                                    "(for redo experiments)")
    p.add_argument("run")
    p.add_argument("new")
    p.set_defaults(fn=cmd_fork)

    p = sub.add_parser("compare", help="paired canary table of two runs' candidates of a round")
    p.add_argument("run_a")
    p.add_argument("run_b")
    p.add_argument("--round", type=int, help="default: the last round both have a gate "
                                             "evaluation for")
    p.add_argument("--markdown", metavar="FILE", help="also write the table as markdown "
                                                      "(e.g. docs/results/<name>.md)")
    p.set_defaults(fn=cmd_compare)

    p = sub.add_parser("eval", help="evaluate a model on the canary suites")
    p.add_argument("model", help="model dir, a run dir (its promoted model), "
                                 "embedded:smollm2-135m or tiny:W")
    p.add_argument("--suite", help="comma list of built-in canaries (reasoning, recovery, "
                                   "single_turn, multi_turn, irrelevance, many_tools) or "
                                   "bfcl_<category> of canaries.bfcl")
    p.add_argument("--k", type=int)
    p.add_argument("--backend")
    p.add_argument("--out", default="runs/eval")
    p.add_argument("--config")
    p.add_argument("--preset")
    p.add_argument("-o", "--set", dest="overrides", action="append", metavar="KEY=VALUE")
    p.add_argument("--bfcl", metavar="CATEGORIES", help="evaluate on BFCL instead: comma list "
                   "of categories, or all, single_turn, multi_turn")
    p.add_argument("--limit", type=int, help="with --bfcl: a seeded sample of N items per category")
    p.add_argument("--seed", type=int, default=0, help="with --bfcl: item sample and sampling seed")
    p.add_argument("-v", "--verbose", action="store_true", help="engine logs on the console")
    p.set_defaults(fn=cmd_eval)

    p = sub.add_parser("export", help="export a run's promoted model (or a model dir) to GGUF")
    p.add_argument("target", help="run directory or HF model directory")
    p.add_argument("--quant", default="Q6_K", choices=["Q6_K", "Q8_0", "Q5_K_M", "Q4_K_M"])
    p.add_argument("--out")
    p.add_argument("--no-load-check", action="store_true")
    p.set_defaults(fn=cmd_export)

    p = sub.add_parser("chat", help="chat with a GGUF; built-in tools run for real")
    p.add_argument("model", help="a .gguf file")
    p.add_argument("--prompt", help="one-shot question instead of an interactive session")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--domains", help="comma list of built-in tool domains (default: all), "
                                     "e.g. weather,currency")
    p.set_defaults(fn=cmd_chat)

    p = sub.add_parser("bench", help=f"benchmarks: {', '.join(BENCHES)}")
    p.add_argument("name", choices=sorted(BENCHES))
    p.add_argument("rest", nargs=argparse.REMAINDER, help="arguments of the benchmark")
    p.set_defaults(fn=cmd_bench)

    p = sub.add_parser("config", help="every config key with its type, default and help")
    p.add_argument("--markdown", action="store_true", help="as docs/config.md")
    p.set_defaults(fn=cmd_config)

    p = sub.add_parser("tasks", help="print generated tasks with tools and ground truth")
    from data.tasks import KINDS
    p.add_argument("--kind", default="chained", choices=KINDS)
    p.add_argument("--n", type=int, default=5)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--split", default="train", choices=["train", "canary"])
    p.add_argument("--context-tokens", type=int, default=2000)
    p.add_argument("--domains", help="comma list of domains to draw from (default: the six "
                                      "built-in ones), e.g. synthetic or mypkg.stocks")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_tasks)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from pipeline import console
    console.setup(verbose=getattr(args, "verbose", False))
    from pipeline.config import ConfigError
    from engine.runstore import RunLocked
    from pipeline.redo import RedoError
    try:
        return args.fn(args) or 0
    except (ConfigError, RunLocked, FileNotFoundError, RedoError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        if err.errno not in WRITE_ERRORS:
            raise
        print(write_error(err), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
