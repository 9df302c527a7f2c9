"""Gate reports (JSON + Markdown), the run summary table, and report.html in headless Chromium."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from gates.html import write_run_report
from gates.promote import decide
from gates.report import (detail_table, final_vs_base, final_vs_base_table, summary_table,
                          write_gate_report)
from pipeline.config import GateSettings

PRIMARY = {"multi_turn": "success", "single_turn": "exact", "irrelevance": "no_call"}


def evaluation(values: dict[str, list[float]]) -> dict:
    suites = {}
    for name, vals in values.items():
        m = PRIMARY[name]
        items = {f"{name}-{i}": {m: v, "pass@k": float(v > 0)} for i, v in enumerate(vals)}
        suites[name] = {"version": "v1", "hash": f"hash-{name}", "primary": m,
                        "n_items": len(vals), "source": "built-in",
                        "metrics": {m: sum(vals) / len(vals),
                                    "pass@k": sum(float(v > 0) for v in vals) / len(vals)},
                        "items": items}
    return {"k": 2, "suites": suites}


BASE = evaluation({"multi_turn": [0, 0, 0.5, 0, 0.5, 0, 0, 0],
                   "single_turn": [1, 0.5, 0, 1, 1, 0, 1, 0.5],
                   "irrelevance": [1, 1, 0.5, 1, 1, 1, 0, 1]})
ROUNDS = [  # (candidate, relaxed, force)
    (evaluation({"multi_turn": [1, 0.5, 1, 0.5, 1, 0.5, 1, 0.5],
                 "single_turn": [1, 0.5, 0.5, 1, 1, 0, 1, 0.5],
                 "irrelevance": [1, 1, 0.5, 1, 1, 1, 0, 1]}), False, False),
    (evaluation({"multi_turn": [1, 0.5, 1, 0.5, 1, 0.5, 1, 1],
                 "single_turn": [0, 0, 0, 0, 1, 0, 0, 0],
                 "irrelevance": [1, 1, 1, 1, 1, 1, 0, 1]}), False, False),
    (evaluation({"multi_turn": [1, 1, 1, 1, 1, 0.5, 1, 1],
                 "single_turn": [1, 0.5, 0.5, 1, 1, 0.5, 1, 0.5],
                 "irrelevance": [0.5, 0.5, 0, 0.5, 0.5, 0.5, 0, 0.5]}), True, True),
]
NAMES = ["grounding", "plan-finish", "long-context"]


def make_run(root: Path) -> Path:
    run = root / "demo-run"
    baseline = BASE
    for n, ((cand, relaxed, force), name) in enumerate(zip(ROUNDS, NAMES), 1):
        th = GateSettings(keep_se=0.5 if relaxed else 2.0, relaxed=relaxed,
                          floors={"irrelevance": 0.5})
        d = decide(cand, baseline, th, target="multi_turn", force=force)
        rdir = run / f"round-{n}-{name}"
        write_gate_report(rdir / "gate", d, cand, baseline, {"round": n, "name": name})
        with open(rdir / "train_log.jsonl", "w") as f:
            for step in range(1, 11):
                f.write(json.dumps({"step": step, "loss": 2.0 / (step + n)}) + "\n")
        if d.promote:
            baseline = cand
            (run / "promoted.json").write_text(json.dumps({"round": n, "name": name}))
    with open(run / "round-3-long-context" / "grpo_log.jsonl", "w") as f:
        for step in range(1, 8):
            f.write(json.dumps({"step": step, "reward": 0.3 + 0.05 * step,
                                "kl": 0.01 * step}) + "\n")
    return run


def test_gate_report_files_and_numbers(tmp_path):
    run = make_run(tmp_path)
    rep = json.loads((run / "round-1-grounding/gate/report.json").read_text())
    assert rep["decision"] == "PROMOTED" and rep["promote"] and not rep["forced"]
    mt = rep["canaries"]["multi_turn"]
    # multi_turn d = [1, .5, .5, .5, .5, .5, 1, .5]: mean 0.625, SD^2 = (2*.140625 +
    # 6*.015625)/7 = 0.375/7, SE = sqrt(0.375/56) = 0.08183
    assert mt["comparisons"]["success"]["delta"] == pytest.approx(0.625)
    assert mt["comparisons"]["success"]["se"] == pytest.approx((0.375 / 56) ** 0.5)
    assert mt["verdict"] == "pass (target)"
    assert mt["baseline"]["success"] == pytest.approx(1 / 8)
    md = (run / "round-1-grounding/gate/report.md").read_text()
    assert "**Decision: PROMOTED**" in md
    assert "| success | 0.125 | 0.750 | +0.625 | 0.082 | 8/0/0 | pass (target) |" in md

    rep2 = json.loads((run / "round-2-plan-finish/gate/report.json").read_text())
    assert rep2["decision"] == "NOT PROMOTED"
    assert rep2["canaries"]["single_turn"]["verdict"] == "FAIL (no-drop)"
    failed = [r for r in rep2["rules"] if not r["passed"]]
    assert {(r["name"], r["canary"]) for r in failed} == {("no-drop", "single_turn"),
                                                          ("target", "multi_turn")}

    rep3 = json.loads((run / "round-3-long-context/gate/report.json").read_text())
    assert rep3["forced"] and rep3["thresholds"]["relaxed"]
    md3 = (run / "round-3-long-context/gate/report.md").read_text()
    assert "RELAXED THRESHOLDS" in md3 and "--force was given" in md3
    assert rep3["decision"] == "PROMOTED (FORCED: rules failed)"
    assert "- [ ] **floor** irrelevance.no_call: candidate 0.375 vs floor 0.500" in md3


def test_summary_table_lists_rounds_canaries_and_promoted(tmp_path):
    run = make_run(tmp_path)
    text = summary_table(run)
    lines = text.splitlines()
    assert lines[0].split() == ["round", "irrelevance", "multi_turn", "single_turn", "decision"]
    assert lines[2].startswith("0 base") and "0.125" in lines[2]
    assert "1 round-1-grounding" in lines[3] and "0.750 (+0.625)" in lines[3]
    # round 2 is compared with round 1's promoted candidate: 0.6875 -> 0.125
    assert "NOT PROMOTED" in lines[4] and "0.125 (-0.562) !" in lines[4]
    assert "PROMOTED (FORCED: rules failed) [relaxed]" in lines[5]
    assert "0.375 (-0.438) !" in lines[5]  # irrelevance under its floor, forced anyway
    assert 'promoted: {"round": 3, "name": "long-context"}' in text
    assert "no gate reports" in summary_table(tmp_path / "empty")


def test_detail_table_gives_n_wins_losses_se_and_mde(tmp_path):
    run = make_run(tmp_path)
    rows = [line.split() for line in detail_table(run).splitlines()[2:11]]
    by = {(r[0] + " " + r[1], r[2]): r for r in rows}
    # round 1's target: 8 items, 0.125 -> 0.750, 8 wins, 2 x SE = 2 x 0.08183, MDE 2.84^2 /
    # (8 + 2.84^2) = 0.502 (keep)
    assert by[("1 grounding", "multi_turn")][3:] == ["*", "8", "0.125", "0.750", "8/0",
                                                     "+0.625", "0.164", "0.502", "(keep)",
                                                     "pass", "(target)"]
    assert by[("2 plan-finish", "single_turn")][3:6] == ["8", "0.688", "0.125"]
    assert by[("2 plan-finish", "single_turn")][-2:] == ["FAIL", "(no-drop)"]
    assert detail_table(tmp_path / "empty") == ""


def test_final_vs_base_pairs_the_promoted_model_with_the_base_on_common_items(tmp_path):
    run = tmp_path / "run"
    (run / "evals" / "base").mkdir(parents=True)
    (run / "evals" / "base" / "eval.json").write_text(json.dumps(BASE))
    final_dir = run / "round-2-plan-finish" / "gate" / "candidate"
    final_dir.mkdir(parents=True)
    final = evaluation({"multi_turn": [1, 0.5, 1, 0.5, 1, 0.5, 1, 1],
                        "irrelevance": [1, 1, 0.5, 1, 0, 1]})  # 6 of the base's 8 items
    (final_dir / "eval.json").write_text(json.dumps(final))
    assert final_vs_base(run) == []  # nothing promoted yet
    (run / "promoted.json").write_text(json.dumps(
        {"round": 2, "name": "plan_finish", "eval_dir": str(final_dir)}))
    rows = {r["canary"]: r for r in final_vs_base(run)}
    assert set(rows) == {"multi_turn", "irrelevance"}  # single_turn: the final has none
    irr = rows["irrelevance"]
    # common items 0-5: base [1, 1, 0.5, 1, 1, 1], final [1, 1, 0.5, 1, 0, 1]; one loss of 1
    assert (irr["n"], irr["wins"], irr["losses"]) == (6, 0, 1)
    assert irr["delta"] == pytest.approx(-1 / 6)
    # diffs [0, 0, 0, 0, -1, 0]: var (5/36 + 25/36) / 5 = 1/6, SE sqrt(1/6 / 6) = 1/6
    assert irr["se"] == pytest.approx(1 / 6)
    assert irr["within"] is True and final_vs_base(run, se_mult=0.5)[0]["within"] is False
    mt = rows["multi_turn"]
    assert (mt["n"], mt["wins"], mt["losses"], mt["within"]) == (8, 8, 0, True)
    assert mt["base"] == pytest.approx(0.125) and mt["final"] == pytest.approx(0.8125)
    text = final_vs_base_table(run)
    assert text.startswith("final promoted model (round 2 plan_finish) vs the base model")
    assert "multi_turn   8  0.125  0.812  8/0  +0.688" in text


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_html_report_renders_in_headless_chromium(tmp_path):
    run = make_run(tmp_path)
    page = write_run_report(run)
    html = page.read_text()
    assert page == run / "report.html"
    assert html.count("data:image/png;base64,") == 3 + 3 + 1  # canaries, train logs, grpo log
    assert "Relaxed thresholds in round(s) 3" in html and "Forced promotion" in html
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    png = tmp_path / "report.png"
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--no-first-run", "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}",
           "--window-size=1280,2400", f"--screenshot={png}", page.resolve().as_uri()]
    subprocess.run(cmd, capture_output=True, timeout=120)
    assert png.exists() and png.stat().st_size > 10_000
    import matplotlib.image as mpimg
    img = mpimg.imread(png)                       # (H, W, C) floats in [0, 1]
    assert img.shape[0] >= 2000 and img.shape[1] >= 1200
    rgb = img[..., :3]
    assert rgb.std() > 0.05                        # not a blank page
    assert (rgb.mean(axis=2) < 0.5).mean() > 0.005  # dark pixels: text and plot lines
    # the relaxed banner's yellow (#fff3cd) is on screen
    yellow = (abs(rgb[..., 0] - 1.0) < 0.02) & (abs(rgb[..., 1] - 0.953) < 0.02) & \
             (abs(rgb[..., 2] - 0.804) < 0.03)
    assert yellow.sum() > 1000


def test_a_rounds_own_drop_abs_decides_its_gate_only():
    from rounds.settings import RoundSettings
    gate = GateSettings(drop_abs={"reasoning": 0.25}, floors={"irrelevance": 0.5})
    rs = RoundSettings(target="multi_turn", drop_abs={"irrelevance": 0.6})
    mine = gate.for_round(rs)
    assert mine.drop_abs == {"reasoning": 0.25, "irrelevance": 0.6}
    assert gate.drop_abs == {"reasoning": 0.25}                     # the run's stay as set
    assert gate.for_round(RoundSettings()) is gate
    base = evaluation({"multi_turn": [0] * 8, "irrelevance": [1] * 8})
    cand = evaluation({"multi_turn": [1] * 8, "irrelevance": [1, 1, 1, 1, 1, 0, 0, 0]})
    # irrelevance 1.0 -> 0.625: 3 losses, 2 x SE = 0.366 < 0.375, refused under the run's rule
    assert not decide(cand, base, gate, target="multi_turn").promote
    ok = decide(cand, base, mine, target="multi_turn")           # held by the floor instead
    assert ok.promote
    with pytest.raises(ValueError, match="drop_abs"):
        RoundSettings(drop_abs={"irrelevance": 1.5})
    with pytest.raises(ValueError, match="drop_abs"):
        RoundSettings(drop_abs={"nonsense": 0.1})


def test_report_markdown_writes_the_tables_with_command_and_sides(tmp_path, monkeypatch, capsys):
    """`pipeline report RUN --markdown F` writes what `report` prints, with its command, and
    the metrics a canary scores over part of its items (many_tools' calls / abstentions);
    the run's absolute path reads as the run given."""
    from pipeline.cli import main
    run = make_run(tmp_path)
    rp = run / "round-1-grounding" / "gate" / "report.json"
    rep = json.loads(rp.read_text())
    rep["canaries"]["single_turn"]["comparisons"]["calls"] = {
        "n": 5, "baseline": 0.2, "candidate": 0.6, "delta": 0.4, "se": 0.2, "wins": 2,
        "losses": 0, "ties": 3, "note": ""}
    rp.write_text(json.dumps(rep))
    (run / "promoted.json").write_text(json.dumps({"round": 1, "name": "grounding",
                                                   "model": str(run.resolve() / "m")}))
    monkeypatch.chdir(tmp_path)
    assert main(["report", "demo-run", "--markdown", "docs/demo.md", "--note", "CPU shared"]) == 0
    text = (tmp_path / "docs" / "demo.md").read_text()
    assert "- command: `pipeline report demo-run --markdown docs/demo.md --note 'CPU shared'`" \
        in text
    assert "- note: CPU shared" in text and "## Gates in detail" in text
    side = next(line for line in text.splitlines() if " calls " in line).split()
    assert side[2:] == ["single_turn", "calls", "5", "0.200", "0.600", "+0.400", "0.200",
                        "2/0/3"]
    assert str(tmp_path) not in text and '"model": "demo-run/m"' in text


def test_report_markdown_counts_many_tools_per_request_domain(tmp_path):
    """The page splits the candidate's many_tools items by the request's domain, scored as the
    gate scored them (eval.json's calls / abstentions, not the trajectory's own verdict): right
    calls and first turns with no call over items with a fitting tool, rightly declined items
    over the rest; other canaries' items are not counted."""
    from data.chatformat import format_call
    from gates.run_markdown import domain_table
    run = make_run(tmp_path)
    items, rows = {}, []

    def item(i, domain, kind, called, score, verified, canary="many_tools"):
        tid = f"canary-canary-v2-{canary}-{i}"
        said = format_call("get_weather", {"city": "Oslo"}) if called else "No tool fits."
        rows.append({"id": f"{tid}#0.0", "task_id": tid, "domain": domain, "kind": kind,
                     "round": 0, "sample": 0, "seed": 0, "source": "policy",
                     "messages": [{"role": "user", "content": "q"},
                                  {"role": "assistant", "content": said}],
                     "tools": [], "verification": {"success": verified, "score": float(verified)}})
        items[tid] = ({"correct": score, "calls": score} if kind == "single"
                      else {"correct": score, "abstentions": score})
    item(0, "weather", "single", False, 0.0, False)
    item(1, "weather", "single", True, 0.0, True)     # a verified answer, a wrong first call
    item(2, "weather", "single", True, 1.0, True)
    item(3, "weather", "irrelevance", False, 1.0, True)
    item(4, "units", "irrelevance", True, 0.0, False)
    item(5, "units", "single", True, 1.0, True)
    item(6, "units", "single", False, 0.0, False, canary="single_turn")
    cand = run / "round-1-grounding" / "gate" / "candidate"
    cand.mkdir(parents=True)
    (cand / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    many = {t: v for t, v in items.items() if "many_tools" in t}
    (cand / "eval.json").write_text(json.dumps({"suites": {"many_tools": {"items": many}}}))
    lines = domain_table(run).splitlines()
    assert lines[0].split() == ["round", "domain", "call", "items", "right", "call", "no", "call",
                                "no-call", "items", "declined"]
    assert [line.split() for line in lines[2:]] == [
        ["1", "grounding", "units", "1", "1", "0", "1", "0"],
        ["1", "grounding", "weather", "3", "1", "1", "1", "1"]]
    assert domain_table(tmp_path / "empty") == ""


def test_report_markdown_quotes_each_training_log_by_its_first_and_last_tenth(tmp_path):
    """The training section gives each round's logged steps and the mean loss over the first
    and last tenth of them (not one step's noise); the closing summary row is no step."""
    from engine.training.loss_summary import tenth_means
    from gates.run_markdown import training_table
    assert tenth_means([]) is None and tenth_means([3.0]) == (3.0, 3.0)
    assert tenth_means([float(i) for i in range(1, 12)]) == (1.5, 10.5)   # 11 steps: tenth = 2
    run = make_run(tmp_path)
    with open(run / "round-1-grounding" / "train_log.jsonl", "a") as f:
        f.write(json.dumps({"step": 10, "train_loss": 0.5, "train_tokens_per_second": 150.25})
                + "\n")
    rows = [line.split() for line in training_table(run).splitlines()[2:]]
    assert rows == [["1", "grounding", "train_log.jsonl", "10", "1.0000", "0.1818", "150.2"],
                    ["2", "plan-finish", "train_log.jsonl", "10", "0.6667", "0.1667", "-"],
                    ["3", "long-context", "train_log.jsonl", "10", "0.5000", "0.1538", "-"]]
    assert training_table(tmp_path / "empty") == ""
