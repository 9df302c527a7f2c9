"""Teacher trace files: each row checked (execute / schema / trust) before it can train; good
rows reach accepted.jsonl as `source: teacher`, bad ones are counted by reason, file and line."""
from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import pytest
from pydantic import ValidationError

from data import jsonl, tasks as taskgen
from data.chatformat import format_call
from data.filters import Decontaminator
from data.teacher import load_teacher
from data.trajectory import Task, Trajectory
from pipeline import config
from pipeline.config import RunConfig
from rounds.grounding import GroundingSettings
from rounds.settings import Teacher
from engine.runstore import RunStore
from rounds.common import RoundContext, accept, teacher_trajectories

HERMES = Path(__file__).parent / "data" / "hermes_sample.jsonl"


def hermes_row(task: Task, turns: list[dict] | None = None, rid: str = "") -> dict:
    """A task's conversation (its oracle unless `turns` is given) in Hermes form, the way a
    teacher dataset stores it: tools as a JSON string, tool results in <tool_response>."""
    convo = [{"from": "system", "value": task.system}, {"from": "human", "value": task.prompt}]
    for m in turns if turns is not None else task.oracle:
        if m["role"] == "assistant":
            convo.append({"from": "gpt", "value": m["content"]})
            continue
        block = f"<tool_response>\n{m['content']}\n</tool_response>"
        if convo[-1]["from"] == "tool":  # parallel results share one tool turn
            convo[-1]["value"] += "\n" + block
        else:
            convo.append({"from": "tool", "value": block})
    return {"id": rid or task.id, "tools": json.dumps(task.tools), "conversations": convo}


def edited(task: Task, index: int, content: str) -> list[dict]:
    """The task's oracle with message `index` given other content."""
    turns = [dict(m) for m in task.oracle]
    turns[index]["content"] = content
    return turns


def write(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def context(tmp_path: Path, teacher: dict) -> RoundContext:
    return RoundContext(cfg=RunConfig(), settings=GroundingSettings(teacher=teacher),
                        store=RunStore(tmp_path / "run"), number=1, name="grounding",
                        start_model=tmp_path / "base", decontaminator=Decontaminator([]),
                        open_backend=lambda model_dir: nullcontext(), progress=False)


@pytest.fixture(scope="module")
def tasks() -> dict[str, Task]:
    make = lambda kind, i=0: taskgen.make(kind, i, namespace="teacher-test")  # noqa: E731
    return {"single": make("single"), "chained": make("chained"), "parallel": make("parallel"),
            "recovery": make("recovery"), "timeout": make("recovery", 1),
            "other": make("single", 1)}


def test_mixed_file_trains_its_good_rows_and_counts_the_bad_ones(tmp_path, tasks):
    other = tasks["other"]
    gold = other.gold_calls[0]
    path = write(tmp_path / "teacher.jsonl", [
        hermes_row(tasks["single"]),                                                  # 1 good
        hermes_row(tasks["chained"]),                                                 # 2 good
        hermes_row(other, edited(other, 0, format_call("launch_rocket", gold.arguments)),
                   rid="undeclared"),                                                 # 3
        '{"id": "broken", "conversations": [',                                        # 4
        hermes_row(other, edited(other, 0, format_call(gold.name, {"nonsense": 1})),
                   rid="schema"),                                                     # 5
        hermes_row(tasks["parallel"]),                                                # 6 good
        hermes_row(other, edited(other, 1, '{"temperature": 999}'), rid="lie"),      # 7
        hermes_row(tasks["recovery"]),                                                # 8 good
    ])
    ctx = context(tmp_path, {"file": str(path), "verify": "execute"})

    rows = teacher_trajectories(ctx, list(tasks.values()))
    accepted = accept(ctx, rows)

    stored = jsonl.read_all(ctx.dir / "accepted.jsonl", Trajectory)
    good = {tasks[k].id for k in ("single", "chained", "parallel", "recovery")}
    assert {t.task_id for t in stored} == good and len(accepted) == 4
    assert all(t.source == "teacher" and t.verification.success for t in stored)
    assert all(t.verification.checks["executed"] for t in stored)
    for t in stored:  # the trace's tool results were replaced by the environment's
        assert all("ok" in m for m in t.messages if m["role"] == "tool")
    recovery = next(t for t in stored if t.task_id == tasks["recovery"].id)
    assert [m["ok"] for m in recovery.messages if m["role"] == "tool"] == [False, True]

    stats = ctx.stats["teacher"]
    assert (stats["read"], stats["kept"], stats["dropped"]) == (8, 4, 4)
    assert stats["why"] == {"unreadable row": 1, "undeclared tool": 1,
                            "schema-invalid arguments": 1,
                            "result contradicts the environment": 1}
    named = "\n".join(stats["rows"])
    for line, reason in ((3, "undeclared tool: assistant turn 1: unknown tool 'launch_rocket'"),
                         (4, "not valid JSON"), (5, "schema-invalid arguments"),
                         (7, "result contradicts the environment: call 1")):
        assert f"{path}:{line}: " in named and reason in named.split(f"{path}:{line}: ")[1]
    assert (ctx.dir / "teacher_dropped.txt").read_text().count(str(path)) == 4
    done = RunStore(tmp_path / "run").state()["rounds"]["1"]["done"]
    assert (done["teacher"]["kept"], done["teacher"]["verify"]) == (4, "execute")
    assert done["accepted"]["by_source"] == {"teacher": 4}


def test_hermes_sample_keeps_its_good_rows_per_mode():
    schema = load_teacher(HERMES, "schema")
    assert [t.id for t in schema.kept] == ["hermes-h1", "hermes-h2", "hermes-h3"]
    assert all(t.source == "teacher" and t.success for t in schema.kept)
    assert schema.kept[0].verification.checks == {"well_formed": True, "declared_tools": True,
                                                  "schema_valid": True}
    assert "verify: schema" in schema.kept[0].verification.reasons[0]
    assert schema.stats()["why"] == {"unreadable row": 1, "schema-invalid arguments": 1}
    assert any(f"{HERMES}:4: schema-invalid arguments" in r for r in schema.stats()["rows"])
    assert any(f"{HERMES}:5: unknown speaker" in r for r in schema.stats()["rows"])

    trust = load_teacher(HERMES, "trust")  # h4's call to a misnamed argument is kept as is
    assert [t.id for t in trust.kept] == ["hermes-h1", "hermes-h2", "hermes-h3", "hermes-h4"]
    assert trust.stats()["kept_as"] == "trusted, not verified"
    assert trust.kept[3].verification.checks == {"well_formed": True}

    execute = load_teacher(HERMES, "execute")  # stock tools: no domain can re-run them
    assert execute.kept == []
    assert execute.stats()["why"] == {"unreadable row": 1, "cannot re-execute": 3,
                                      "schema-invalid arguments": 1}
    assert any(f"{HERMES}:1: cannot re-execute: no known domain implements get_stock_price"
               in r for r in execute.stats()["rows"])


def test_execute_replays_results_and_rejects_contradictions(tmp_path, tasks):
    task = tasks["single"]
    result = task.oracle[1]["content"]
    envelope = json.dumps({"name": task.gold_calls[0].name, "content": json.loads(result)})
    value = json.loads(result)
    lie = {**value, **{k: v + 7 for k, v in value.items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool)}}
    assert lie != value
    path = write(tmp_path / "t.jsonl", [
        hermes_row(task, edited(task, 1, envelope), rid="envelope"),   # Hermes {"name","content"}
        hermes_row(task, edited(task, 1, json.dumps(lie)), rid="lie"),
        hermes_row(task, edited(task, 2, "I could not find out."), rid="wrong-answer"),
    ])
    with_task = load_teacher(path, "execute", [task])
    assert [t.id for t in with_task.kept] == ["hermes-envelope"]
    kept = with_task.kept[0]
    assert kept.task_id == task.id and kept.verification.checks["answer"]
    assert kept.messages[3] == {**task.oracle[1], "ok": True}  # the environment's own message
    assert with_task.stats()["why"] == {"result contradicts the environment": 1,
                                        "failed verification": 1}
    wrong = next(r for r in with_task.stats()["rows"] if f"{path}:3:" in r)
    assert "does not match" in wrong

    # without the task the built-in domains still re-run the calls; the answer is unchecked
    alone = load_teacher(path, "execute")
    assert [t.id for t in alone.kept] == ["hermes-envelope", "hermes-wrong-answer"]
    assert "no task" in alone.kept[0].verification.reasons[0]
    assert alone.stats()["why"] == {"result contradicts the environment": 1}

    # a trace of an injected timeout: only its task's environment reproduces the fault
    timeout = tasks["timeout"]
    assert timeout.faults["mode"] == "timeout"
    rec = write(tmp_path / "r.jsonl", [hermes_row(timeout)])
    assert len(load_teacher(rec, "execute", [timeout]).kept) == 1
    assert load_teacher(rec, "execute").stats()["why"] == {
        "result contradicts the environment": 1}


@pytest.mark.parametrize("messages, reason", [
    ([{"role": "assistant", "content": "Hi"}], "malformed turns"),
    ([{"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": '<tool_call>\n{"name": "get_weather", "arguments": '
                                       '{"city": "Paris"}}\n</tool_call>'},
      {"role": "tool", "content": '{"temperature": 12}'}], "no final answer"),
    ([{"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": '<tool_call>\n{"name": "get_weather", "arguments": '
                                       '{"city": "Paris"}}\n</tool_call>'},
      {"role": "assistant", "content": "It is 12 C."}], "malformed turns"),
    ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
      {"role": "tool", "content": "{}"}, {"role": "assistant", "content": "Bye"}],
     "malformed turns"),
    ([{"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": '<tool_call>\n{"name": "get_weather", "arguments": '
                                       '{"city": "Paris"</tool_call>'},
      {"role": "tool", "content": "{}"}, {"role": "assistant", "content": "Done"}],
     "malformed assistant turn"),
    ([{"role": "user", "content": "Weather in five cities?"},
      {"role": "assistant", "content": "\n".join(
          '<tool_call>\n{"name": "get_weather", "arguments": {"city": "%s"}}\n</tool_call>' % c
          for c in ("Paris", "Rome", "Oslo", "Lima", "Cairo"))},
      *[{"role": "tool", "content": "{}"}] * 5, {"role": "assistant", "content": "Done"}],
     "too many calls in one turn"),
])
def test_even_trusted_rows_must_be_well_formed(tmp_path, messages, reason):
    path = write(tmp_path / "t.jsonl", [{"id": "x", "messages": messages}])
    out = load_teacher(path, "trust")
    assert out.kept == [] and out.stats()["why"] == {reason: 1}
    assert out.stats()["rows"][0].startswith(f"{path}:1: {reason}")


def test_teacher_settings_are_checked_when_the_config_loads(tmp_path):
    assert Teacher().verify == "schema"
    with pytest.raises(ValidationError, match="execute"):
        Teacher(verify="sometimes")
    with pytest.raises(config.ConfigError, match="nope.jsonl: teacher file not found"):
        config.load(preset="tiny", overrides=[
            f"rounds.grounding.teacher={{file: {tmp_path / 'nope.jsonl'}}}"])
    good = write(tmp_path / "t.jsonl", [])
    cfg = config.load(preset="tiny", overrides=[
        f"rounds.grounding.teacher={{file: {good}, verify: execute}}"])
    assert cfg.rounds["grounding"].teacher.verify == "execute"
