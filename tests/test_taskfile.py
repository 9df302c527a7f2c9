"""Task files: rows validated on load (errors name file, line and field), defaults for what a
hand-written row leaves out, a round reading them beside its generated tasks."""
from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import pytest

from data import jsonl, tasks as taskgen
from data.chatformat import Call
from data.environment import DomainEnvironment
from data.filters import Decontaminator
from data.jsonl import DataError
from data.taskfile import load_task_files, load_tasks
from data.trajectory import Task
from pipeline import config
from pipeline.config import RunConfig
from rounds.grounding import GroundingSettings
from engine.runstore import RunStore
from rounds.common import RoundContext, make_tasks

ORDER = {"type": "function", "function": {
    "name": "lookup_order", "description": "An order's status.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "integer"}},
                   "required": ["order_id"]}}}


def write(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_generated_tasks_round_trip(tmp_path):
    tasks = taskgen.generate({k: 1 for k in taskgen.KINDS}, namespace="taskfile",
                             context_tokens=600) + [taskgen.make("recovery", 1)]
    path = tmp_path / "tasks.jsonl"
    jsonl.write_atomic(path, tasks)
    assert [t.model_dump() for t in load_tasks(path)] == [t.model_dump() for t in tasks]


def test_hand_written_rows_get_defaults(tmp_path):
    path = write(tmp_path / "mine.jsonl", [
        {"prompt": "What is the weather in Paris?", "domain": "weather", "answer": "Paris",
         "gold_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"messages": [{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                      {"role": "user", "content": "Where is order 42?"}],
         "tools": [ORDER["function"]], "answer": "shipped",
         "gold_calls": [{"name": "lookup_order", "arguments": {"order_id": 42}}]},
        {"prompt": "Write a haiku about rain.", "tools": [ORDER], "answer": None},
        {"prompt": "What is 6 times 7?", "tools": [], "answer": 42, "id": "times"},
    ])
    weather, order, haiku, times = load_tasks(path)
    assert (weather.id, weather.domain, weather.kind, weather.min_calls) == (
        "mine-1", "weather", "single", 1)
    assert weather.system == taskgen.SYSTEM and weather.tools == taskgen.DOMAINS["weather"].tools
    assert (order.domain, order.system, order.prompt) == ("custom", "Be brief.",
                                                          "Where is order 42?")
    assert order.history == [{"role": "user", "content": "Hi"},
                             {"role": "assistant", "content": "Hello"}]
    assert order.tools == [ORDER]  # a bare function declaration is wrapped
    assert order.min_calls == 0    # no domain implements lookup_order: it cannot succeed here
    assert (haiku.kind, times.kind, times.id) == ("irrelevance", "reasoning", "times")
    assert len({t.seed for t in (weather, order, haiku, times)}) == 4
    # a tool no domain implements is still playable: the environment says not_found
    result = DomainEnvironment.for_task(order).execute(Call("lookup_order", {"order_id": 42}))
    assert result.error.code == "not_found"


def test_bad_rows_name_file_line_and_field(tmp_path):
    path = write(tmp_path / "bad.jsonl", [
        {"prompt": "Weather in Oslo?", "domain": "weather", "answer": "Oslo", "id": "a"},
        {"prompt": "Weather in Rome?", "domain": "weather"},
        {"prompt": "Order 7?", "tools": [ORDER], "answer": "x",
         "gold_calls": [{"name": "cancel_order", "arguments": {}}]},
        "{not json",
        {"prompt": "Order 8?", "answer": "x"},
        {"prompt": "Order 9?", "tools": [ORDER], "answer": "x",
         "gold_calls": [{"name": "lookup_order", "arguments": {"order_id": "nine"}}]},
        {"prompt": "Again", "domain": "weather", "answer": "y", "id": "a"},
        {"prompt": "Kind?", "tools": [], "answer": 1, "kind": "poetry"},
        {"prompt": "Schema?", "tools": [{"name": "f", "parameters": {"type": "thing"}}],
         "answer": 1},
    ])
    with pytest.raises(DataError) as err:
        load_tasks(path)
    lines = str(err.value).splitlines()
    expected = [(2, "field 'answer': Field required"),
                (3, "field 'gold_calls[0]': unknown tool 'cancel_order'"),
                (4, "not valid JSON"),
                (5, "field 'tools': missing"),
                (6, "field 'gold_calls[0]': invalid arguments for lookup_order at order_id"),
                (7, "field 'id': 'a' is already the id of line 1"),
                (8, "field 'kind': Input should be"),
                (9, "field 'tools[0].parameters': not a valid JSON schema")]
    assert len(lines) == len(expected)
    for line, (n, what) in zip(lines, expected):
        assert line.startswith(f"{path}:{n}: {what}"), line
    with pytest.raises(DataError, match="task file not found"):
        load_tasks(tmp_path / "missing.jsonl")


def test_ids_are_unique_across_files(tmp_path):
    row = {"prompt": "Weather in Oslo?", "domain": "weather", "answer": "Oslo", "id": "same"}
    a, b = write(tmp_path / "a.jsonl", [row]), write(tmp_path / "b.jsonl", [row])
    with pytest.raises(DataError, match=r"b.jsonl: field 'id': 'same' is also a task of .*a.jsonl"):
        load_task_files([a, b])


def test_task_files_are_checked_when_the_config_loads(tmp_path):
    good = write(tmp_path / "good.jsonl", [
        {"prompt": "Weather in Oslo?", "domain": "weather", "answer": "Oslo"}])
    cfg = config.load(preset="tiny", overrides=[f"rounds.plan_finish.task_files=['{good}']"])
    assert cfg.rounds["plan_finish"].task_files == [str(good)]
    bad = write(tmp_path / "bad.jsonl", [{"prompt": "Weather in Oslo?", "domain": "weather"}])
    with pytest.raises(config.ConfigError, match=rf"rounds.grounding.*{bad}:1: field 'answer'"):
        config.load(preset="tiny", overrides=[f"rounds.grounding.task_files=['{bad}']"])
    with pytest.raises(config.ConfigError, match="rounds.rl_polish.task_files: unknown key"):
        config.load(preset="tiny", overrides=[f"rounds.rl_polish.task_files=['{good}']"])


def test_a_round_reads_task_files_beside_its_generators(tmp_path):
    canary = "Weather in Oslo, please, for the canary suite?"
    path = write(tmp_path / "mine.jsonl", [
        {"prompt": "Where is order 42?", "tools": [ORDER], "answer": "shipped"},
        {"prompt": canary, "domain": "weather", "answer": "Oslo"},
    ])
    ctx = RoundContext(cfg=RunConfig(),
                       settings=GroundingSettings(tasks={"single": 2}, task_files=[str(path)]),
                       store=RunStore(tmp_path / "run"), number=1, name="grounding",
                       start_model=tmp_path / "base", decontaminator=Decontaminator([canary]),
                       open_backend=lambda model_dir: nullcontext(), progress=False)
    tasks = make_tasks(ctx)
    assert [t.id for t in tasks][-1] == "mine-1" and len(tasks) == 3
    assert [t.model_dump() for t in jsonl.read_all(ctx.dir / "tasks.jsonl", Task)] == [
        t.model_dump() for t in tasks]
    done = RunStore(tmp_path / "run").state()["rounds"]["1"]["done"]["tasks"]
    assert (done["tasks"], done["from_files"], done["decontaminated"]) == (3, 1, 1)
