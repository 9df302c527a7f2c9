"""What each round trained on, one line per pool / length fit / frontier probe, in both
`pipeline status` and the run summary, read from state.json alone."""
import json

POOL = {"tasks": 4, "samples": 12, "probe_samples": 8, "pass@1": 0.4583, "pass@k": 0.75,
        "probe_pass@1": 0.375, "probe_pass@k": 0.5,
        "difficulty": {"solved": 1, "frontier": 2, "unsolved": 1},
        "kept": {"solved": 0, "frontier": 2, "unsolved": 0}, "train_on": ["frontier"]}
FRONTIER = {"tasks": 8, "probe_k": 4, "pass@1": 0.375, "pass@k": 0.75,
            "difficulty": {"solved": 2, "frontier": 3, "unsolved": 3}, "used": 4,
            "used_difficulty": {"solved": 0, "frontier": 3, "unsolved": 1}, "filled": 1,
            "min_tasks": 4}
CONTEXT = {"used": [800, 1600], "needs": {"800": 1237, "1600": 1394},
           "refused": {"8000": "needs 3482 tokens > 3072"}, "limit": 3072}


def _run(tmp_path):
    state = {"rounds": {
        "2": {"status": "rejected", "done": {"pool": POOL}},
        "3": {"status": "rejected", "done": {"context": CONTEXT}},
        "5": {"status": "running", "done": {"frontier": FRONTIER}}}}
    (tmp_path / "state.json").write_text(json.dumps(state))
    return tmp_path


def test_status_and_summary_name_pool_fit_and_frontier(tmp_path):
    from gates.report import round_notes
    from pipeline.status import status_text
    run = _run(tmp_path)
    pool = ("pass@1 0.458 pass@k 0.750 (probe 0.375/0.500), 4 tasks, 12 samples; tasks "
            "solved/frontier/unsolved 1/2/1; kept 0/2/0 (train on frontier)")
    frontier = ("probe k=4: pass@1 0.375 pass@k 0.750, 8 tasks solved/frontier/unsolved 2/3/3; "
                "GRPO on 4 (1 filled up nearest 0.5)")
    context = ("lengths used 800 (1237 tok), 1600 (1394 tok); refused 8000: needs 3482 tokens "
               "> 3072; limit 3072 tokens")
    notes = round_notes(run)
    assert notes == ["", f"round 2 pool: {pool}", f"round 3 context: {context}",
                     f"round 5 frontier: {frontier}"]
    text = status_text(run)
    for line in (f"      pool: {pool}", f"      context: {context}",
                 f"      frontier: {frontier}"):
        assert line in text.splitlines()
