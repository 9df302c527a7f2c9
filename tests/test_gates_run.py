"""A gate run on a tiny random model: evaluate baseline and candidate, decide, write reports."""
import json

import pytest

from data.jsonl import read_all
from data.trajectory import Trajectory
from gates.canaries import build_suites
from gates.evaluate import evaluate, load_eval
from gates.html import write_run_report
from gates.promote import decide
from gates.report import summary_table, write_gate_report
from pipeline.config import GateSettings
from engine.sampling import SamplingParams, make_backend

SIZES = {"reasoning": 2, "recovery": 2, "single_turn": 2, "multi_turn": 2, "irrelevance": 2}


def test_gate_run_on_tiny_model_writes_all_reports(tmp_path, tiny_model):
    suites = build_suites(SIZES, version="test")
    params = SamplingParams(temperature=1.0, max_tokens=12)
    backend = make_backend("transformers", tiny_model, dtype="float32")
    try:
        run = tmp_path / "run"
        base = evaluate(backend, suites, k=2, params=params, out_dir=run / "baseline",
                        max_context_tokens=2048, meta={"model": "tiny:64"})
        cand = evaluate(backend, suites, k=2, params=params,
                        out_dir=run / "round-1-grounding" / "gate" / "eval",
                        max_context_tokens=2048, meta={"model": "tiny:64 (candidate)"})
        # the baseline is reused as it is when asked again with the same settings
        again = evaluate(backend, suites, k=2, params=params, out_dir=run / "baseline",
                         max_context_tokens=2048)
    finally:
        backend.close()
    assert again.to_dict() == base.to_dict()

    b, c = base.to_dict(), load_eval(cand.path)
    trajs = read_all(run / "baseline" / "rollouts.jsonl", Trajectory)
    assert len(trajs) == 10 * 2                               # items x k
    assert all(t.completion_tokens > 0 for t in trajs)
    for s in suites:
        got = b["suites"][s.name]
        assert got["hash"] == s.hash and got["n_items"] == len(s.items) == 2
        assert set(got["items"]) == {t.id for t in s.items}
        for m in s.metrics:  # aggregate = mean of the per-item values, all in [0, 1]
            vals = [v[m] for v in got["items"].values()]
            assert all(0.0 <= v <= 1.0 for v in vals)
            assert got["metrics"][m] == pytest.approx(sum(vals) / len(vals))
        assert sum(got["finish"].values()) == 4
    # same model, same seeds (the seed round is fixed): identical per-item values -> a tie
    assert c["suites"] == b["suites"]

    d = decide(c, b, GateSettings(relaxed=True), target="multi_turn")
    assert not d.promote and [r.name for r in d.failures()] == ["target"]
    json_path, md_path = write_gate_report(run / "round-1-grounding" / "gate", d, c, b,
                                           {"round": 1, "name": "grounding",
                                            "candidate_eval": str(cand.path)})
    rep = json.loads(json_path.read_text())
    assert rep["decision"] == "NOT PROMOTED" and rep["thresholds"]["relaxed"]
    for name in SIZES:
        comp = rep["canaries"][name]["comparisons"]
        primary = rep["canaries"][name]["primary"]
        assert comp[primary]["delta"] == 0.0 and comp[primary]["ties"] == 2
        assert comp[primary]["baseline"] == pytest.approx(b["suites"][name]["metrics"][primary])
    assert "Decision: NOT PROMOTED" in md_path.read_text()
    assert "RELAXED THRESHOLDS" in md_path.read_text()
    html = write_run_report(run)
    assert html.exists() and "multi_turn" in html.read_text()
    assert "1 round-1-grounding" in summary_table(run)
