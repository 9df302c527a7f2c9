"""Filters report what they drop; JSONL files are atomic and name the bad row."""
from __future__ import annotations

import json

import pytest

from data import filters, jsonl, tasks, verify
from data.trajectory import Trajectory


def _traj(task, sample=0, messages=None, success=True):
    msgs = messages or task.messages() + task.oracle
    v = verify.verify(task, msgs)
    if not success:
        v = v.model_copy(update={"success": False, "reasons": ["final answer wrong"]})
    return Trajectory(id=f"{task.id}#{sample}", task_id=task.id, domain=task.domain,
                      kind=task.kind, sample=sample, messages=msgs, tools=task.tools,
                      finish="answer", verification=v,
                      completion_tokens=sum(len(m["content"]) for m in task.oracle))


def test_rejection_dedup_and_distribution_matching():
    ts = tasks.generate({"single": 6, "chained": 3})
    rows = [_traj(t, s) for t in ts for s in range(3)] + [_traj(ts[0], 9, success=False)]
    kept, rep = filters.rejection(rows)
    assert rep.kept == 27 and rep.dropped == {"final answer wrong": 1}
    kept, rep = filters.dedup(kept)  # three identical oracle copies per task
    assert rep.kept == 9 and rep.dropped["duplicate trajectory"] == 18
    longer = _traj(ts[0], 5, messages=ts[0].messages() + ts[0].oracle[:-1] + [
        {"role": "assistant", "content": ts[0].oracle[-1]["content"] + " Anything else?"}])
    longer.completion_tokens += 100
    kept2, rep = filters.distribution_match(kept + [longer], cap_per_task=1)
    assert rep.dropped["over the per-task cap"] == 1 and longer not in kept2
    kept3, rep = filters.distribution_match(kept, cap_per_task=1, balance=("kind",), max_rows=4)
    assert sorted(t.kind for t in kept3) == ["chained", "chained", "single", "single"]


def test_decontamination_by_hash_and_13gram():
    canary = ["Book the cheapest flight from JFK to LHR on 2026-04-03 for Ana Lopez and give "
              "me the confirmation code please now"]
    d = filters.Decontaminator(canary)
    assert d.reason("book the cheapest flight from JFK to LHR on 2026-04-03 for Ana Lopez and "
                    "give me the confirmation code please now") == "prompt equals a canary prompt"
    assert "13-gram" in d.reason("Hey: Book the cheapest flight from JFK to LHR on 2026-04-03 "
                                 "for Ana Lopez and give me the code")
    assert d.reason("Book the cheapest flight from DUB to SYD on 2026-04-09 for Ken Ito.") is None
    ts = tasks.generate({"single": 50})
    cans = tasks.generate({"single": 50}, split="canary", namespace="x")
    kept, rep = filters.decontaminate(ts, filters.Decontaminator([c.prompt for c in cans]),
                                      prompt_of=lambda t: t.prompt)
    assert rep.kept + sum(rep.dropped.values()) == 50
    assert not {t.prompt for t in kept} & {c.prompt for c in cans}


def test_jsonl_atomic_torn_tail_and_bad_rows(tmp_path):
    path = tmp_path / "rows.jsonl"
    t = tasks.make("single", 0)
    assert jsonl.write_atomic(path, [t, t]) == 2
    assert not (tmp_path / "rows.jsonl.tmp").exists()
    with open(path, "a") as f:
        f.write('{"id": "half')  # a write killed mid-row
    with jsonl.Appender(path) as app:
        app.write(t)
    assert len(jsonl.read_all(path, type(t))) == 3
    with open(path, "a") as f:
        f.write("not json\n")
    with pytest.raises(jsonl.DataError, match=r"rows.jsonl:4: not valid JSON"):
        jsonl.read_all(path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**t.model_dump(), "kind": "dance"}) + "\n")
    with pytest.raises(jsonl.DataError, match=r"bad.jsonl:1: field 'kind'"):
        jsonl.read_all(bad, type(t))
