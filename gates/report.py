"""Gate reports: `gate/report.json` + `gate/report.md` per round, and the run's summary table.

The JSON is the record (decision, every rule with its numbers, per-canary paired statistics,
suite hashes); the Markdown is the same for people; `summary_table(run_dir)` is what
`pipeline report RUN` prints: rounds x canaries, verdicts, the promoted model.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

from data.jsonl import write_text_atomic

from .promote import Decision, paired_common
from .stats import drop_mde, keep_mde

ROUND_DIR = re.compile(r"round-(\d+)")


def _verdict(decision: Decision, canary: str) -> str:
    mine = [r for r in decision.rules if r.canary == canary]
    failed = sorted({r.name for r in mine if not r.passed})
    if failed:
        return "FAIL (" + ", ".join(failed) + ")"
    target = any(r.name == "target" for r in mine)
    return "pass (target)" if target else "pass"


def decision_word(promote: bool, forced: bool, passed: bool) -> str:
    if forced and not passed:
        return "PROMOTED (FORCED: rules failed)"
    if forced:
        return "PROMOTED (forced; rules passed anyway)"
    return "PROMOTED" if promote else "NOT PROMOTED"


def mde(decision: Decision, canary: str, n: int) -> dict:
    """The canary's minimum detectable effect under its rule (80% power, wins without
    losses; `gates.stats.detectable`): the keep rule for the target, the drop rule else."""
    th = decision.thresholds
    if canary == decision.target.partition(".")[0]:
        return {"rule": "keep", "value": round(keep_mde(n, th.keep_se), 4)}
    return {"rule": "drop", "value": round(drop_mde(n, th.drop_se, th.tolerance_abs(canary)), 4)}


def gate_report(decision: Decision, candidate: dict, baseline: dict, meta: dict) -> dict:
    """The report.json content (pure)."""
    canaries = {}
    for name, comps in decision.comparisons.items():
        c, b = candidate["suites"][name], baseline["suites"][name]
        canaries[name] = {
            "version": c.get("version"), "hash": c.get("hash"), "source": c.get("source"),
            "n_items": c.get("n_items"), "mde": mde(decision, name, c.get("n_items") or 0),
            "primary": c.get("primary"),
            "baseline": b.get("metrics", {}), "candidate": c.get("metrics", {}),
            "comparisons": {m: p.to_dict() for m, p in comps.items()},
            "verdict": _verdict(decision, name)}
    return {"meta": {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                     **meta},
            "decision": decision_word(decision.promote, decision.forced, decision.passed),
            "promote": decision.promote, "forced": decision.forced, "passed": decision.passed,
            "target": decision.target,
            "thresholds": decision.thresholds.to_dict(decision.comparisons),
            "rules": [r.__dict__ for r in decision.rules], "canaries": canaries,
            "k": candidate.get("k")}


def render_markdown(report: dict) -> str:
    meta, th = report["meta"], report["thresholds"]
    title = f"Gate report: round {meta.get('round', '?')}"
    if meta.get("name"):
        title += f" ({meta['name']})"
    lines = [f"# {title}", "", f"**Decision: {report['decision']}**", "",
             f"- target: `{report['target']}`; k = {report.get('k')} samples per item",
             f"- thresholds: keep {th['keep_se']:g} SE; drop tolerance max({th['drop_se']:g} SE, "
             f"abs per canary {th['drop_abs']}); floors {th['floors'] or 'none'}"]
    lines.append("- MDE: the smallest true change a canary's rule sees with 80% power if it "
                 "comes as wins without losses (keep rule for the target, drop rule for the "
                 "others)")
    if th.get("relaxed"):
        lines.append("- **RELAXED THRESHOLDS**: this gate ran with loosened thresholds"
                     + (" (a tie on the target passes)" if th.get("allow_tie") else "")
                     + "; its decision is weaker evidence than a default gate.")
    if report["forced"]:
        lines.append("- **--force was given**: the model is promoted whatever the rules say.")
    for key in ("candidate", "baseline", "candidate_eval", "baseline_eval"):
        if meta.get(key):
            lines.append(f"- {key}: `{meta[key]}`")
    for name, c in report["canaries"].items():
        power = c.get("mde")
        power = f"; MDE {power['value']:.3f} ({power['rule']} rule)" if power else ""
        lines += ["", f"## {name}: {c['verdict']}", "",
                  f"n = {c['n_items']} items, suite {c['version']} `{str(c['hash'])[:12]}`, "
                  f"primary metric `{c['primary']}`{power}", "",
                  "| metric | baseline | candidate | delta | SE | wins/losses/ties | verdict |",
                  "|---|---:|---:|---:|---:|---|---|"]
        for m, p in c["comparisons"].items():
            verdict = c["verdict"] if m == c["primary"] else ""
            if f"{name}.{m}" == report["target"] and m != c["primary"]:
                verdict = "target"
            lines.append(f"| {m} | {p['baseline']:.3f} | {p['candidate']:.3f} | "
                         f"{p['delta']:+.3f} | {p['se']:.3f} | {p['wins']}/{p['losses']}/"
                         f"{p['ties']} | {verdict} |")
    lines += ["", "## Rules", ""]
    lines += [f"- [{'x' if r['passed'] else ' '}] **{r['name']}** {r['detail']}"
              for r in report["rules"]]
    return "\n".join(lines) + "\n"


def write_gate_report(out_dir: str | Path, decision: Decision, candidate: dict, baseline: dict,
                      meta: dict | None = None) -> tuple[Path, Path]:
    """Write `report.json` and `report.md` into `out_dir` (a round's `gate/`), atomically."""
    out_dir = Path(out_dir)
    report = gate_report(decision, candidate, baseline, dict(meta or {}))
    json_path, md_path = out_dir / "report.json", out_dir / "report.md"
    write_text_atomic(json_path, json.dumps(report, indent=1, ensure_ascii=False))
    write_text_atomic(md_path, render_markdown(report))
    return json_path, md_path


# ---------------------------------------------------------------------------- run summary

def round_reports(run_dir: str | Path) -> list[tuple[int, Path, dict]]:
    """(round number, round dir, report.json) of every round that has a gate report."""
    out = []
    for d in Path(run_dir).glob("round-*"):
        m = ROUND_DIR.match(d.name)
        rp = d / "gate" / "report.json"
        if m and d.is_dir() and rp.exists():
            try:
                out.append((int(m.group(1)), d, json.loads(rp.read_text())))
            except json.JSONDecodeError:
                continue  # a report being written; the next call sees it whole
    return sorted(out, key=lambda x: x[0])


def promoted(run_dir: str | Path) -> dict | None:
    p = Path(run_dir) / "promoted.json"
    try:
        return json.loads(p.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def history(run_dir: str | Path) -> dict:
    """Each canary's primary metric across rounds: round 0 is the first baseline (the base
    model), then each round's candidate, with its SE, decision and thresholds."""
    reports = round_reports(run_dir)
    canaries: list[str] = []
    rows = []
    for n, d, rep in reports:
        for name in rep.get("canaries", {}):
            if name not in canaries:
                canaries.append(name)
    if reports:
        _, _, first = reports[0]
        rows.append({"round": 0, "dir": "base model", "decision": "baseline", "relaxed": False,
                     "forced": False, "promote": True,
                     "values": {c: v["baseline"].get(v["primary"])
                                for c, v in first["canaries"].items()},
                     "se": {}, "delta": {}})
    for n, d, rep in reports:
        cs = rep.get("canaries", {})
        rows.append({"round": n, "dir": d.name, "decision": rep.get("decision", "?"),
                     "relaxed": rep.get("thresholds", {}).get("relaxed", False),
                     "forced": rep.get("forced", False), "promote": rep.get("promote", False),
                     "target": rep.get("target"),
                     "values": {c: v["candidate"].get(v["primary"]) for c, v in cs.items()},
                     "se": {c: v["comparisons"][v["primary"]]["se"] for c, v in cs.items()
                            if v["primary"] in v["comparisons"]},
                     "delta": {c: v["comparisons"][v["primary"]]["delta"] for c, v in cs.items()
                               if v["primary"] in v["comparisons"]},
                     "verdicts": {c: v["verdict"] for c, v in cs.items()}})
    return {"canaries": canaries, "rows": rows, "promoted": promoted(run_dir)}


def summary_table(run_dir: str | Path) -> str:
    """Rounds x canaries (primary metric, delta vs that round's baseline), decisions, and
    the promoted model, as plain text for a terminal."""
    h = history(run_dir)
    if not h["rows"]:
        return "\n".join([f"{run_dir}: no gate reports yet (round-*/gate/report.json)"]
                         + round_notes(run_dir))
    cols = h["canaries"]
    head = ["round"] + cols + ["decision"]
    table = [head]
    for r in h["rows"]:
        cells = [str(r["round"]) + (" " + r["dir"] if r["round"] else " base")]
        for c in cols:
            v = r["values"].get(c)
            if v is None:
                cells.append("-")
                continue
            cell = f"{v:.3f}"
            if c in r["delta"]:
                cell += f" ({r['delta'][c]:+.3f})"
                if r.get("verdicts", {}).get(c, "pass").startswith("FAIL"):
                    cell += " !"
            cells.append(cell)
        word = r["decision"] + (" [relaxed]" if r["relaxed"] else "")
        cells.append(word)
        table.append(cells)
    lines = columns(table)
    lines.append("")
    lines.append("values: primary metric of each canary (delta vs the promoted baseline); "
                 "'!' = a rule failed for that canary")
    p = h["promoted"]
    lines.append("promoted: " + (json.dumps(p, ensure_ascii=False) if p is not None
                                 else "none recorded (promoted.json missing)"))
    return "\n".join(lines + round_notes(run_dir))


def columns(table: list[list[str]]) -> list[str]:
    """Rows of cells as left-aligned text columns, a rule under the first row."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def detail_table(run_dir: str | Path) -> str:
    """One row per round and canary: n, baseline -> candidate of the primary metric, wins /
    losses, the paired SE times the rule's multiple, the MDE at that n, and the verdict; the
    round's target marked `*`. What a reader needs to tell "no gain" from "could not see"."""
    reports = round_reports(run_dir)
    if not reports:
        return ""
    table = [["round", "canary", "n", "baseline", "candidate", "W/L", "delta", "k x SE",
              "MDE (rule)", "verdict"]]
    for n, d, rep in reports:
        th = rep.get("thresholds", {})
        for name, c in rep.get("canaries", {}).items():
            cmp_ = c.get("comparisons", {}).get(c.get("primary"), {})
            target = name == str(rep.get("target", "")).split(".")[0]
            mult = th.get("keep_se" if target else "drop_se", 2.0)
            m = c.get("mde") or {}
            table.append([f"{n} {d.name.split('-', 2)[-1]}", name + (" *" if target else ""),
                          str(c.get("n_items", cmp_.get("n", "?"))),
                          f"{cmp_.get('baseline', 0):.3f}", f"{cmp_.get('candidate', 0):.3f}",
                          f"{cmp_.get('wins', 0)}/{cmp_.get('losses', 0)}",
                          f"{cmp_.get('delta', 0):+.3f}", f"{mult * cmp_.get('se', 0):.3f}",
                          f"{m.get('value', float('nan')):.3f} ({m.get('rule', '?')})",
                          c.get("verdict", "?")])
    return "\n".join(columns(table) + ["", "* the round's target; k x SE: keep_se x SE for the "
                                         "target, drop_se x SE for the others; MDE: the "
                                         "smallest true change the rule sees with 80% power"])


def final_vs_base(run_dir: str | Path, se_mult: float = 2.0) -> list[dict]:
    """The promoted model against the base model on every canary both evaluations hold,
    paired over their common items (suites are prefix-stable, so the common items are the
    smaller suite): what the run ships compared with what it started from, not with the
    previous round. `within` says whether the delta is no lower than -se_mult x SE."""
    root, p = Path(run_dir), promoted(run_dir)
    base_dir = root / "evals" / "base"
    if not p or not p.get("round") or not (base_dir / "eval.json").exists():
        return []
    from .evaluate import load_eval
    base = load_eval(base_dir).get("suites", {})
    final = load_eval(p["eval_dir"]).get("suites", {})
    out = []
    for name in sorted(set(base) & set(final)):
        b, f = base[name], final[name]
        metric = f.get("primary", b.get("primary"))
        c = paired_common(f, b, metric)
        if c is None:
            continue
        out.append({"canary": name, "metric": metric, "n": c.n, "base": c.baseline,
                    "final": c.candidate, "delta": c.delta, "se": c.se, "wins": c.wins,
                    "losses": c.losses, "within": c.delta >= -se_mult * c.se})
    return out


def final_vs_base_table(run_dir: str | Path, se_mult: float = 2.0) -> str:
    """`final_vs_base` as plain text: the promoted round, then one row per canary."""
    rows = final_vs_base(run_dir, se_mult)
    if not rows:
        return ""
    p = promoted(run_dir)
    table = [["canary", "n", "base", "final", "W/L", "delta", f"{se_mult:g} x SE", "verdict"]]
    for r in rows:
        table.append([r["canary"], str(r["n"]), f"{r['base']:.3f}", f"{r['final']:.3f}",
                      f"{r['wins']}/{r['losses']}", f"{r['delta']:+.3f}",
                      f"{se_mult * r['se']:.3f}",
                      "not below" if r["within"] else f"below by more than {se_mult:g} SE"])
    return "\n".join([f"final promoted model (round {p['round']} {p['name']}) vs the base "
                      "model, paired over the items both evaluated:"] + columns(table))


def round_notes(run_dir: str | Path) -> list[str]:
    """One line per pass-rate-aware pool and per long-context length fit that the run's
    `state.json` records (rounds 2-4 with `pool`, round 3), so the table's verdicts come with
    what the rounds trained on."""
    try:
        rounds = json.loads((Path(run_dir) / "state.json").read_text()).get("rounds", {})
    except (FileNotFoundError, json.JSONDecodeError):
        return []
    out = [f"round {n} {step}: {note}"
           for n, r in sorted(rounds.items(), key=lambda x: int(x[0]))
           for step, note in step_notes(r.get("done", {}))]
    return [""] + out if out else []


def step_notes(done: dict) -> list[tuple[str, str]]:
    """(step, one line) for each recorded step of a round that says what it trained on: a
    pool (rounds 2-4), round 3's length fit, round 5's frontier probe, new and replayed
    rows (rounds 2-4)."""
    out = []
    for step, info in done.items():
        if step == "frontier" and "used" in info:
            out.append((step, frontier_text(info)))
        elif "pass@1" in info:
            out.append((step, pool_text(info)))
        elif step == "context" and "used" in info:
            out.append((step, context_text(info)))
        elif step.startswith("replay") and "replayed" in info:
            out.append((step, replay_text(info)))
    return out


def replay_text(r: dict) -> str:
    """`12 new (chained 8, single 4) + 5 replayed: round 1 chained 2, single 3 (share 0.30,
    pool 40, 1 dropped by decontamination)` (`rounds.replay`)."""
    def kinds(c: dict) -> str:
        return ", ".join(f"{k} {v}" for k, v in c.items())
    by_round = "; ".join(f"round {n} {kinds(c)}" for n, c in r.get("by_round", {}).items())
    return (f"{r.get('new', 0)} new ({kinds(r.get('new_by_kind', {})) or '-'}) + "
            f"{r['replayed']} replayed" + (f": {by_round}" if by_round else "")
            + f" (share {r.get('share', 0):.2f}, pool {r.get('pool', 0)}, "
              f"{r.get('decontaminated', 0)} dropped by decontamination)")


def frontier_text(f: dict) -> str:
    """`probe k=4: pass@1 0.375 pass@k 0.750, 8 tasks solved/frontier/unsolved 2/4/2; GRPO on
    4 (1 filled up nearest 0.5)`."""
    d = f.get("difficulty", {})
    trio = "/".join(str(d.get(k, 0)) for k in ("solved", "frontier", "unsolved"))
    filled = f" ({f['filled']} filled up nearest 0.5)" if f.get("filled") else ""
    return (f"probe k={f.get('probe_k')}: pass@1 {f['pass@1']:.3f} pass@k {f['pass@k']:.3f}, "
            f"{f.get('tasks', 0)} tasks solved/frontier/unsolved {trio}; GRPO on "
            f"{f['used']}{filled}")


def pool_text(p: dict) -> str:
    """`pass@1 0.458 pass@k 0.750 (probe 0.375/0.500), 4 tasks, 12 samples; tasks
    solved/frontier/unsolved 1/2/1; kept 0/2/0 (train on frontier)`."""
    d, kept = p.get("difficulty", {}), p.get("kept", {})

    def trio(c: dict) -> str:
        return "/".join(str(c.get(k, 0)) for k in ("solved", "frontier", "unsolved"))
    return (f"pass@1 {p['pass@1']:.3f} pass@k {p['pass@k']:.3f} (probe "
            f"{p.get('probe_pass@1', 0):.3f}/{p.get('probe_pass@k', 0):.3f}), "
            f"{p.get('tasks', 0)} tasks, {p.get('samples', 0)} samples; tasks solved/frontier/"
            f"unsolved {trio(d)}; kept {trio(kept)} (train on "
            f"{'+'.join(p.get('train_on', []))})")


def context_text(c: dict) -> str:
    """`lengths used 800 (1237 tok), 1600 (1394 tok); refused 12000: why; limit 4096`."""
    needs = c.get("needs", {})
    used = ", ".join(f"{k} ({needs.get(str(k), '?')} tok)" for k in c["used"]) or "none"
    refused = "; ".join(f"{k}: {why}" for k, why in c.get("refused", {}).items())
    return (f"lengths used {used}" + (f"; refused {refused}" if refused else "")
            + f"; limit {c.get('limit')} tokens")


def machine_lines(run_dir: str | Path) -> list[str]:
    """The machines the run ran on (state.json `machines`), one line each: CPU model and
    capability, cores, library versions. Seeded runs repeat on one CPU, not across CPUs."""
    path = Path(run_dir) / "state.json"
    machines = json.loads(path.read_text()).get("machines", []) if path.exists() else []
    out = []
    for m in machines:
        libs = ", ".join(f"{k} {v}" for k, v in m.get("versions", {}).items() if v)
        out.append(f"machine: {m.get('cpu', '?')} ({m.get('capability', '?')}), "
                   f"{m.get('cores', '?')} cores; {libs} (since {m.get('since', '?')})")
    return out
