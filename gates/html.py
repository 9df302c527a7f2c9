"""The run's `report.html`: every canary across rounds, where the time went, and the training
curves, one file.

Plots are PNGs drawn with matplotlib (Agg) and embedded as data URIs, so the report can be
copied anywhere; the time breakdown (one stacked bar per round, from each round's `timing` in
state.json) is inline SVG. Rounds gated with relaxed thresholds are shaded and labelled in the
plots and flagged in a banner; forced promotions likewise.
"""
from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

from data.jsonl import write_text_atomic
from engine import timing
from engine.training.panels import GRPO_PANELS, SFT_PANELS, panel_grid

from .report import ROUND_DIR, history, round_reports, summary_table

CSS = """
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1200px; }
h1 { margin-bottom: 4px; } .sub { color: #666; margin-top: 0; }
.banner { padding: 10px 14px; margin: 12px 0; border-radius: 6px; font-weight: bold; }
.relaxed { background: #fff3cd; border: 2px solid #e0a800; color: #7a5a00; }
.forced { background: #f8d7da; border: 2px solid #c82333; color: #721c24; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 14px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
th:first-child, td:first-child, td.word, th:last-child { text-align: left; }
td.fail { background: #f8d7da; } td.ok { background: #d4edda; }
.plots { display: flex; flex-wrap: wrap; align-items: flex-start; }
.plots img { margin: 4px; border: 1px solid #ddd; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; font-size: 12px; }
"""


def _png(fig) -> str:
    import matplotlib.pyplot as plt
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def canary_plot(name: str, rows: list[dict]) -> str:
    """One canary's primary metric per round (base model = round 0), SE bars, decisions."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.6, 3.2))
    pts = [(r["round"], r["values"][name], r["se"].get(name, 0.0), r) for r in rows
           if r["values"].get(name) is not None]
    if pts:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color="#999", lw=1, zorder=1)
    for x, y, se, r in pts:
        color = "#777" if r["round"] == 0 else ("#2a9d3a" if r["promote"] else "#d62828")
        ax.errorbar([x], [y], yerr=[se], fmt="o", color=color, ms=7, capsize=3, zorder=2,
                    markeredgecolor="#e07b00" if r["forced"] else color,
                    markeredgewidth=2.5 if r["forced"] else 1)
        if r["forced"]:
            ax.annotate("forced", (x, y), xytext=(0, -16), textcoords="offset points",
                        ha="center", fontsize=7, color="#e07b00", fontweight="bold")
        if r["relaxed"]:
            ax.axvspan(x - 0.4, x + 0.4, color="#ffd54f", alpha=0.45, zorder=0)
            ax.text(x, 1.02, "relaxed", ha="center", va="bottom", fontsize=7, color="#7a5a00")
    ax.set_title(name)
    ax.set_xlabel("round (0 = base model)")
    ax.set_ylabel("primary metric")
    ax.set_ylim(-0.05, 1.12)
    rounds = [p[0] for p in pts] or [0]
    ax.set_xticks(range(min(rounds), max(rounds) + 1))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def _read_log(path: Path) -> list[dict]:
    rows = []
    if not path.exists():
        return rows
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            break  # a torn last line
        if isinstance(row, dict):
            rows.append(row)
    return rows


def curve_plot(title: str, rows: list[dict], panels: list[tuple[str, str]]) -> str | None:
    """The `(key, label)` panels the log carries against the logged step (or the row index
    when no step is logged), three to a row."""
    panels = [(k, label) for k, label in panels
              if any(isinstance(r.get(k), (int, float)) for r in rows)]
    if not panels:
        return None
    plt = _pyplot()
    fig, axes = panel_grid(plt, len(panels), 4.2, 3.0)
    for ax, (key, label) in zip(axes, panels):
        pts = [(r.get("step", i), r[key]) for i, r in enumerate(rows)
               if isinstance(r.get(key), (int, float))]
        ax.plot(*zip(*pts), marker="o", ms=3)
        ax.set_title(label)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    return _png(fig)


def training_curves(run_dir: Path) -> list[tuple[str, str]]:
    """(caption, png base64) for each round's train_log.jsonl and grpo_log.jsonl."""
    out = []
    dirs = sorted((d for d in run_dir.glob("round-*") if ROUND_DIR.match(d.name) and d.is_dir()),
                  key=lambda d: int(ROUND_DIR.match(d.name).group(1)))
    for d in dirs:
        for fname, panels in (("train_log.jsonl", SFT_PANELS),
                              ("grpo_log.jsonl", GRPO_PANELS)):
            png = curve_plot(f"{d.name}: {fname}", _read_log(d / fname), panels)
            if png:
                out.append((f"{d.name} / {fname}", png))
    return out


def _img(png: str, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{png}">'


def _summary_html(h: dict) -> str:
    cols = h["canaries"]
    out = ["<table><tr><th>round</th>" + "".join(f"<th>{html.escape(c)}</th>" for c in cols)
           + "<th>decision</th></tr>"]
    for r in h["rows"]:
        cells = [f"<td>{r['round']} {html.escape(r['dir'])}</td>"]
        for c in cols:
            v = r["values"].get(c)
            verdict = r.get("verdicts", {}).get(c, "")
            cls = "fail" if verdict.startswith("FAIL") else "ok" if verdict else ""
            text = "-" if v is None else f"{v:.3f}"
            if c in r["delta"]:
                text += f" ({r['delta'][c]:+.3f} &plusmn; {r['se'].get(c, 0):.3f})"
            cells.append(f'<td class="{cls}" title="{html.escape(verdict)}">{text}</td>')
        word = html.escape(r["decision"]) + (" <b>[RELAXED]</b>" if r["relaxed"] else "")
        cells.append(f'<td class="word">{word}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(out) + "</table>"


def _rules_html(reports) -> str:
    parts = []
    for n, d, rep in reports:
        items = "".join(f"<li>{'&#10003;' if r['passed'] else '&#10007;'} <b>"
                        f"{html.escape(r['name'])}</b> {html.escape(r['detail'])}</li>"
                        for r in rep.get("rules", []))
        parts.append(f"<h3>{html.escape(d.name)}: {html.escape(rep.get('decision', '?'))}</h3>"
                     f"<ul>{items}</ul>")
    return "\n".join(parts)


# One colour per step of `timing.STEP_ORDER`; steps of one's own recipes get grey.
STEP_COLORS = {"tasks": "#8ecae6", "teacher": "#219ebc", "engine_start": "#e63946",
               "engine_stop": "#f28482", "sampling": "#f4a261", "filtering": "#e9c46a",
               "training": "#2a9d8f",
               "merge": "#7fb8a4", "gate_baseline": "#6d597a", "gate_candidate": "#b56576",
               "export": "#457b9d", "load_check": "#a8dadc", "other": "#cccccc"}


def timing_svg(rows: list[tuple[str, list[tuple[str, float]]]]) -> str:
    """(label, [(step, seconds)]) per round -> one stacked horizontal bar each, as inline SVG;
    bar lengths share one scale (the longest round fills the width)."""
    label_w, bar_w, bar_h, gap = 150, 760, 22, 8
    longest = max((sum(s for _, s in steps) for _, steps in rows), default=0.0) or 1.0
    seen = [k for _, steps in rows for k, sec in steps if sec >= 0.05]  # legend: visible ones
    used = [k for k in timing.STEP_ORDER if k in seen] + [k for k in seen
                                                           if k not in timing.STEP_ORDER]
    used = list(dict.fromkeys(used))
    height = len(rows) * (bar_h + gap) + 44
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 90}" '
           f'height="{height}" font-family="sans-serif" font-size="12">']
    for i, (label, steps) in enumerate(rows):
        y, x = i * (bar_h + gap), float(label_w)
        out.append(f'<text x="{label_w - 6}" y="{y + bar_h * 0.7}" text-anchor="end">'
                   f"{html.escape(label)}</text>")
        total = sum(sec for _, sec in steps)
        for step, sec in steps:
            w = bar_w * sec / longest
            share = 100.0 * sec / total if total else 0.0
            out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" '
                       f'fill="{STEP_COLORS.get(step, "#999999")}"><title>{html.escape(step)}: '
                       f"{sec:.1f} s ({share:.0f}%)</title></rect>")
            x += w
        out.append(f'<text x="{x + 6:.1f}" y="{y + bar_h * 0.7}">{total:.0f} s</text>')
    y, x = len(rows) * (bar_h + gap) + 12, float(label_w)
    for step in used:  # legend
        out.append(f'<rect x="{x:.0f}" y="{y}" width="12" height="12" '
                   f'fill="{STEP_COLORS.get(step, "#999999")}"/>'
                   f'<text x="{x + 16:.0f}" y="{y + 10}">{html.escape(step)}</text>')
        x += 24 + 7 * len(step)
        if x > label_w + bar_w - 60:
            x, y = float(label_w), y + 16
    out.append("</svg>")
    return "".join(out)


def _timing_html(run_dir: Path) -> str | None:
    """The 'where the time went' section from state.json's per-round timing, or None."""
    state_path = run_dir / "state.json"
    if not state_path.exists():
        return None
    rounds = json.loads(state_path.read_text()).get("rounds", {})
    rows, timed = [], []
    for n in sorted(rounds, key=int):
        r = rounds[n]
        if not r.get("timing"):
            continue
        timed.append(r["timing"])
        names = [d.name for d in run_dir.glob(f"round-{n}-*") if d.is_dir()]
        rows.append((names[0] if names else f"round {n}",
                     timing.breakdown(r["timing"], r.get("wall_s"))))
    if not rows:
        return None
    total = timing.combine(timed)
    n, secs, reused = timing.engine_starts(total)
    rates = "; ".join(f"{k} {timing.rate(t):.1f} tokens/s"
                      for k, t in total.get("throughput", {}).items())
    return ("<h2>Where the time went</h2><p>Seconds per step and round (hover a segment for "
            f"its share). Sampler engine starts: {n} ({secs:.1f} s), reused {reused} times"
            + (f"; {html.escape(rates)}" if rates else "") + ".</p>" + timing_svg(rows))


def write_run_report(run_dir: str | Path) -> Path:
    """Build `run_dir/report.html` from the round gate reports and training logs."""
    run_dir = Path(run_dir)
    h = history(run_dir)
    reports = round_reports(run_dir)
    body = [f"<h1>Run report: {html.escape(run_dir.name)}</h1>",
            f'<p class="sub">{len(reports)} gated round(s); promoted: '
            f"{html.escape(json.dumps(h['promoted'])) if h['promoted'] else 'none recorded'}</p>"]
    relaxed = [r for r in h["rows"] if r["relaxed"]]
    if relaxed:
        body.append('<div class="banner relaxed">Relaxed thresholds in round(s) '
                    + ", ".join(str(r["round"]) for r in relaxed)
                    + ": those promotions rest on loosened gates.</div>")
    forced = [r for r in h["rows"] if r["forced"]]
    if forced:
        body.append('<div class="banner forced">Forced promotion (--force) in round(s) '
                    + ", ".join(str(r["round"]) for r in forced) + ".</div>")
    if not reports:
        body.append("<p>No gate reports yet.</p>")
    else:
        body += ["<h2>Canaries across rounds</h2>",
                 "<p>Primary metric per canary; in brackets the paired delta against that "
                 "round's baseline &plusmn; its standard error.</p>", _summary_html(h),
                 '<div class="plots">']
        body += [_img(canary_plot(c, h["rows"]), f"canary {c}") for c in h["canaries"]]
        body += ["</div>", "<p>Green: promoted; red: not promoted; orange ring: forced; grey: "
                 "base model; yellow band: relaxed thresholds. Bars: paired SE.</p>"]
    timed = _timing_html(run_dir)
    if timed:
        body.append(timed)
    curves = training_curves(run_dir)
    body.append("<h2>Training curves</h2>")
    body.append("<div class='plots'>" + "".join(_img(png, cap) for cap, png in curves) + "</div>"
                if curves else
                "<p>No training logs found (round-*/train_log.jsonl, grpo_log.jsonl).</p>")
    if reports:
        body += ["<h2>Gate rules per round</h2>", _rules_html(reports),
                 "<h2>Summary (as printed by <code>pipeline report</code>)</h2>",
                 f"<pre>{html.escape(summary_table(run_dir))}</pre>"]
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>Run report: "
            f"{html.escape(run_dir.name)}</title><style>{CSS}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")
    path = run_dir / "report.html"
    write_text_atomic(path, page)
    return path
