"""benchmarks/compare_runs.py: two runs' gate numbers round by round, in pairs; exit 1 when a
number differs; --markdown writes the printout with its command."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("compare_runs",
                                              ROOT / "benchmarks" / "compare_runs.py")
compare_runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_runs)


def _run(root: Path, name: str, candidate: float) -> Path:
    gate = root / name / "round-1-grounding" / "gate"
    gate.mkdir(parents=True)
    comparison = {"baseline": 0.5, "candidate": candidate, "wins": 3, "losses": 1}
    (gate / "report.json").write_text(json.dumps({
        "decision": "promote", "passed": True, "target": "single_turn", "thresholds": {},
        "rules": [{"name": "target", "passed": True, "detail": "ok"}],
        "canaries": {"single_turn": {"hash": "h", "n_items": 100, "mde": 0.075,
                                     "primary": "exact", "baseline": {}, "candidate": {},
                                     "comparisons": {"exact": comparison},
                                     "verdict": "win"}}}))
    (gate.parent / "train_log.jsonl").write_text('{"loss": 1.25}\n')
    return root / name


def test_pairs_identical_then_one_differs(tmp_path, capsys):
    a, b, c = _run(tmp_path, "a", 0.6), _run(tmp_path, "b", 0.6), _run(tmp_path, "c", 0.61)
    page = tmp_path / "page.md"
    assert compare_runs.main([str(a), str(b), "--markdown", str(page), "--note", "N"]) == 0
    text = page.read_text()
    assert "## a against b: identical gate numbers" in text and "N" in text
    assert "compare_runs.py" in text and "0.5 -> 0.6 (3 W / 1 L) win" in text
    assert compare_runs.main([str(a), str(b), str(a), str(c), "--markdown", str(page)]) == 1
    text = page.read_text()
    assert "## a against c: DIFFERENT" in text and "Exit status 1" in text
    assert "gate numbers differ in 1 round(s)" in capsys.readouterr().out


def _conversations(run: Path, answers: list[str], weight: bytes) -> None:
    round_dir = run / "round-1-grounding"
    rows = [{"id": f"item-{i}", "messages": [{"role": "assistant", "content": a}]}
            for i, a in enumerate(answers)]
    (round_dir / "gate" / "candidate").mkdir(parents=True, exist_ok=True)
    (round_dir / "gate" / "candidate" / "rollouts.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows))
    (round_dir / "model").mkdir(exist_ok=True)
    (round_dir / "model" / "model.safetensors").write_bytes(weight)


def test_weights_and_transcripts_are_reported_item_by_item(tmp_path, capsys):
    a, b, c = _run(tmp_path, "a", 0.6), _run(tmp_path, "b", 0.6), _run(tmp_path, "c", 0.6)
    _conversations(a, ["0.992 lb", "yes", "no"], b"w1")
    _conversations(b, ["0.99 lb", "yes", "no"], b"w1")
    _conversations(c, ["0.992 lb", "yes", "no"], b"w2")
    assert compare_runs.main([str(a), str(b)]) == 0     # transcripts are reported, not judged
    out = capsys.readouterr().out
    assert "model weights identical" in out
    assert "candidate transcripts different in 1 of 3 items (item-0)" in out
    assert compare_runs.main([str(a), str(c)]) == 0
    out = capsys.readouterr().out
    assert "model weights different" in out and "candidate transcripts identical (" in out
