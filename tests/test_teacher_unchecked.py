"""`verify: execute` on a teacher row that no round task has the prompt of re-runs its calls
but cannot check its answer: stats, state and status say so instead of "verified"."""
from __future__ import annotations

from data import tasks as taskgen
from engine.runstore import RunStore
from pipeline.status import status_text
from rounds.common import teacher_trajectories
from tests.test_teacher import context, edited, hermes_row, write


def test_an_unmatched_execute_row_is_counted_as_answer_unchecked(tmp_path):
    known = taskgen.make("single", 0, namespace="unchecked-test")
    stray = taskgen.make("single", 1, namespace="unchecked-test")
    wrong = edited(stray, len(stray.oracle) - 1, "The answer is 12345.")  # a wrong answer
    path = write(tmp_path / "teacher.jsonl", [hermes_row(known), hermes_row(stray, wrong)])
    ctx = context(tmp_path, {"file": str(path), "verify": "execute"})

    rows = teacher_trajectories(ctx, [known])  # the stray row's prompt is no round task's

    assert len(rows) == 2
    by_task = {t.task_id: t for t in rows}
    assert by_task[known.id].verification.checks.get("answer_checked", True) is True
    unchecked = [t for t in rows if t.task_id != known.id]
    assert unchecked[0].verification.checks["answer_checked"] is False
    stats = ctx.stats["teacher"]
    assert stats["answer_unchecked"] == 1
    assert stats["kept_as"] == ("1 re-executed and verified, 1 re-executed, answer unchecked "
                                "(no round task has its prompt)")
    done = RunStore(tmp_path / "run").state()["rounds"]["1"]["done"]["teacher"]
    assert done["answer_unchecked"] == 1
    text = status_text(tmp_path / "run")
    assert "teacher (execute): 2 read, 2 kept (1 schema-checked and re-executed, answer " \
           "unchecked), 0 dropped" in text
