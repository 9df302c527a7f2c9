"""Recipe experiments as commands, on one tiny run shared by the module (rounds 1, 2 and 4;
round 3, round 5 and export off to keep it short): `pipeline fork`, `pipeline run RUN
--round 4 --redo train -o ...seed=1`, `pipeline compare`, a redo killed part way and
resumed, and the replay that round 4 trained with."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import wait_for

from data import jsonl
from data.trajectory import Trajectory
from gates.evaluate import load_eval
from gates.promote import paired_common

CLI = [sys.executable, "-m", "pipeline.cli"]
SEED = "rounds.self_improve.sft.seed=1"


def _run(args, **kw):
    return subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True,
                          timeout=900, **kw)


@pytest.fixture(scope="module")
def run_a(tmp_path_factory):
    run = tmp_path_factory.mktemp("redo") / "a"
    res = _run(["run", "--preset", "tiny", "--run-dir", run, "--no-progress",
                "-o", "rounds.long_context.enabled=false", "-o", "rounds.rl_polish.enabled=false",
                "-o", "export.enabled=false", "-o", "rounds.self_improve.replay.share=0.5"])
    assert res.returncode == 0, res.stderr[-3000:]
    return run


def state(run: Path) -> dict:
    return json.loads((run / "state.json").read_text())


def test_round_4_trained_on_new_rows_and_rows_replayed_from_rounds_1_and_2(run_a):
    r4 = run_a / "round-4-self-improve"
    new = jsonl.read_all(r4 / "accepted.jsonl", Trajectory)
    replayed = jsonl.read_all(r4 / "replay.jsonl", Trajectory)
    info = state(run_a)["rounds"]["4"]["done"]["replay"]
    assert info["from_rounds"] == [1, 2] and {t.round for t in replayed} <= {1, 2}
    assert len(replayed) == info["replayed"] == min(len(new), info["pool"])  # share 0.5
    assert info["new"] == len(new)
    assert sum(sum(c.values()) for c in info["by_round"].values()) == len(replayed)
    assert state(run_a)["rounds"]["4"]["done"]["train"]["rows_in"] == len(new) + len(replayed)
    status = _run(["status", run_a]).stdout
    assert f"replay: {len(new)} new (" in status and f"+ {len(replayed)} replayed" in status


@pytest.fixture(scope="module")
def run_b(run_a):
    """A fork of run A, round 4 redone from its training step with another seed."""
    b = run_a.parent / "b"
    res = _run(["fork", run_a, b])
    assert res.returncode == 0, res.stderr[-3000:]
    res = _run(["run", b, "--round", "4", "--redo", "train", "-o", SEED, "--no-progress"])
    assert res.returncode == 0, res.stderr[-3000:]
    assert "redo round 4: dropped train, gate" in res.stderr
    return b


def test_fork_rewrites_paths(run_a, run_b):
    promoted = json.loads((run_b / "promoted.json").read_text())
    assert promoted["model"].startswith(str(run_b)) and promoted["round"] == 4
    assert all(h["model"].startswith(str(run_b)) for h in promoted["history"])
    assert yaml.safe_load((run_b / "run.yaml").read_text())["run_dir"] == str(run_b)
    for f in [*run_b.rglob("*.json"), *run_b.rglob("*.yaml"), *run_b.rglob("*.md")]:
        assert not re.search(re.escape(str(run_a)) + r"(?=[/\"'\s]|$)", f.read_text()), f
    assert (run_b / "round-1-grounding" / "accepted.jsonl").read_text() == \
        (run_a / "round-1-grounding" / "accepted.jsonl").read_text()


def test_redo_train_reruns_the_round_from_training_with_the_override(run_a, run_b):
    sa, sb = state(run_a)["rounds"]["4"], state(run_b)["rounds"]["4"]
    for step in ("tasks", "rollouts", "accepted", "replay"):  # kept as they were
        assert sb["done"][step] == sa["done"][step], step
    assert sb["done"]["train"]["at"] >= sa["done"]["train"]["at"] and sb["status"] == "promoted"
    assert sb["done"]["gate"]["at"] >= sb["done"]["train"]["at"]
    adapter = "round-4-self-improve/adapter/adapter_model.safetensors"
    assert (run_a / adapter).read_bytes() != (run_b / adapter).read_bytes()  # another seed
    assert yaml.safe_load((run_b / "run.yaml").read_text())[
        "rounds"]["self_improve"]["sft"]["seed"] == 1
    assert yaml.safe_load((run_a / "run.yaml").read_text())[
        "rounds"]["self_improve"]["sft"]["seed"] == 0
    redo = state(run_b)["redos"][-1]
    assert (redo["round"], redo["step"], redo["overrides"]) == (4, "train", [SEED])
    assert redo["dropped"] == ["train", "gate"] and redo["rollback"] is True
    assert "redo" not in state(run_b)
    cand_b = load_eval(run_b / "round-4-self-improve" / "gate" / "candidate")
    assert cand_b["meta"]["model"] == str(run_b / "round-4-self-improve" / "model")


def test_compare_prints_the_paired_table_of_the_two_candidates(run_a, run_b, tmp_path):
    md = tmp_path / "results" / "seed.md"
    res = _run(["compare", run_a, run_b, "--markdown", md])
    assert res.returncode == 0, res.stderr[-3000:]
    ea = load_eval(run_a / "round-4-self-improve" / "gate" / "candidate")["suites"]
    eb = load_eval(run_b / "round-4-self-improve" / "gate" / "candidate")["suites"]
    assert res.stdout.startswith("round 4 candidates:")
    for name in ("reasoning", "recovery", "single_turn", "multi_turn", "irrelevance"):
        p = paired_common(eb[name], ea[name], ea[name]["primary"])
        line = next(ln for ln in res.stdout.splitlines() if ln.startswith(name + "."))
        cells = line.split()
        assert cells[1:7] == [str(p.n), f"{p.baseline:.3f}", f"{p.candidate:.3f}",
                              f"{p.delta:+.3f}", f"{p.wins}/{p.losses}", f"{2 * p.se:.3f}"]
    text = md.read_text()
    assert "| canary | n | A | B | delta (B-A) | W/L (B) | 2 SE | verdict |" in text
    assert f"pipeline compare {run_a} {run_b}" in text
    assert _run(["compare", run_a, run_b, "--round", "3"]).returncode == 2  # round 3 was off


def test_redo_errors_are_clear(run_a):
    res = _run(["run", run_a, "--round", "4", "--redo", "nope"])
    assert res.returncode == 2 and "round 4 has no step 'nope' recorded done" in res.stderr
    assert "Traceback" not in res.stderr
    res = _run(["run", run_a, "--round", "3", "--redo", "train"])
    assert res.returncode == 2 and "round 3 has not run" in res.stderr
    assert yaml.safe_load((run_a / "run.yaml").read_text())["rounds"]["self_improve"]["sft"][
        "seed"] == 0  # nothing changed



@pytest.mark.slow
def test_redo_killed_mid_run_finishes_on_a_plain_resume(run_a):
    c = run_a.parent / "c"
    assert _run(["fork", run_a, c]).returncode == 0

    def training_again():  # the drop is done and the round is training again
        try:
            r4 = state(c)["rounds"]["4"]
        except (json.JSONDecodeError, FileNotFoundError):
            return False
        return "redo" not in state(c) and "train" not in r4["done"] and \
            (c / "round-4-self-improve" / "checkpoints").exists()

    proc = subprocess.Popen(CLI + ["run", str(c), "--round", "4", "--redo", "train", "-o", SEED,
                                   "-o", "rounds.self_improve.sft.max_steps=4",
                                   "-o", "rounds.self_improve.sft.save_steps=1",
                                   "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    hit = wait_for(proc, training_again)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert hit
    res = _run(["run", c, "--no-progress"])  # plain resume: the recorded config, overrides in
    assert res.returncode == 0, res.stderr[-3000:]
    r4 = state(c)["rounds"]["4"]
    assert r4["status"] == "promoted" and r4["done"]["train"]["steps"] == 4
    assert yaml.safe_load((c / "run.yaml").read_text())["rounds"]["self_improve"]["sft"][
        "seed"] == 1


def test_a_redo_plan_left_in_state_is_finished_by_the_next_run(run_a):
    """A kill between the drop's state write and its file deletions: the next run deletes
    the stale outputs before it reruns (a stale gate evaluation would be reused otherwise)."""
    from pipeline.redo import finish_redo, plan
    from engine.runstore import RunStore
    d = run_a.parent / "d"
    assert _run(["fork", run_a, d]).returncode == 0
    store = RunStore(d)
    p = plan(store, 4, "gate")
    store.write_json(store.state_path, {**p["state"], "redo": {
        **p["redo"], "quant": "Q6_K", "system": None}})
    gate = d / "round-4-self-improve" / "gate"
    assert gate.exists() and "round-4-self-improve/gate" in p["redo"]["remove"]
    assert finish_redo(store)["step"] == "gate"
    assert not gate.exists() and "redo" not in store.state()
    assert store.promoted()["round"] == 2          # round 4's promotion rolled back
    assert "gate" not in store.state()["rounds"]["4"]["done"]
    assert "train" in store.state()["rounds"]["4"]["done"]


def test_redo_plan_of_an_iterated_round_keeps_the_earlier_iteration(tmp_path):
    """Round 4 with two iterations: redoing train-2 keeps iteration 1's model (iter-1) and
    its rows; redoing `accepted` (its first match, accepted-1) drops both iterations."""
    from pipeline.redo import plan
    from engine.runstore import RunStore
    store = RunStore(tmp_path / "run")
    d = store.round_dir(4, "self_improve")
    steps = [f"{s}-{i}" for i in (1, 2) for s in ("tasks", "rollouts", "accepted", "replay",
                                                  "train")] + ["gate"]
    for s in steps:
        if not s.startswith("train"):
            (d / f"{s}.jsonl").write_text("")
        store.mark(4, s)
    for i in (1, 2):
        (d / f"iter-{i}" / "model").mkdir(parents=True)
    (d / "rollouts-3.jsonl").write_text("")          # a step killed before it was marked done
    p = plan(store, 4, "train-2")["redo"]
    assert p["dropped"] == ["train-2", "gate"]
    rel = {r.removeprefix("round-4-self-improve/") for r in p["remove"]}
    assert {"iter-2", "gate", "export", "rollouts-3.jsonl"} <= rel
    assert not rel & {"iter-1", "accepted-2.jsonl", "replay-2.jsonl"}
    p = plan(store, 4, "accepted")["redo"]
    assert p["dropped"] == steps[2:]
    rel = {r.removeprefix("round-4-self-improve/") for r in p["remove"]}
    assert {"iter-1", "iter-2", "accepted-1.jsonl", "tasks-2.jsonl"} <= rel
    assert not rel & {"tasks-1.jsonl", "rollouts-1.jsonl"}
