"""Decontamination against every evaluation: a training prompt equal to, or sharing a 13-gram
with, a BFCL item (or a canary, or a canary file's item) is dropped and counted under that
source, for generated tasks, task-file rows and teacher rows alike."""
from __future__ import annotations

import json
from contextlib import nullcontext

from data import filters, tasks as taskgen
from data.envs import BUILTIN
from data.bfcl import load_multi_turn, load_single, user_messages
from gates.canaries import build_suites
from gates.decontamination import decontaminator_for, protected_sources
from pipeline.config import RunConfig
from rounds.grounding import GroundingSettings
from engine.runstore import RunStore
from rounds.common import RoundContext, accept, make_tasks, teacher_trajectories

BFCL_ITEM = load_single("simple_python")[7].messages[-1]["content"]
# the same item inside a longer request: no equal hash, but 13 words in a row shared
BFCL_WRAPPED = "Hi there! " + BFCL_ITEM + " Thanks a lot."


def test_sources_are_counted_apart():
    guard = filters.Decontaminator({"canary": ["Weather in Oslo, for the canary suite?"],
                                    "file": ["What is 12 apples plus 30 apples?"],
                                    "bfcl": [BFCL_ITEM]})
    assert guard.sizes == {"canary": 1, "file": 1, "bfcl": 1}
    assert guard.hit(BFCL_ITEM) == filters.Hit("bfcl", "equal")
    assert guard.hit(BFCL_WRAPPED) == filters.Hit("bfcl", "ngram")
    assert guard.reason(BFCL_WRAPPED) == "shares a 13-gram with a bfcl prompt"
    assert guard.reason("what is 12 apples plus 30 apples?") == "prompt equals a file prompt"
    assert guard.reason("weather in oslo, for the canary suite?") == \
        "prompt equals a canary prompt"
    assert guard.hit("Weather in Lima, please.") is None


def test_every_bfcl_user_message_is_read_from_the_question_files():
    turns = [m["content"] for e in load_multi_turn("multi_turn_base") for t in e.turns
             for m in t if m.get("role") == "user" and m.get("content")]
    assert user_messages("multi_turn_base") == turns
    sources = protected_sources(build_suites({"single_turn": 2, "irrelevance": 2}))
    assert len(sources["canary"]) == 4 and sources["file"] == []
    assert BFCL_ITEM in sources["bfcl"] and len(sources["bfcl"]) > 4000


def test_make_tasks_drops_bfcl_items_and_counts_them_by_source(tmp_path):
    rows = [{"prompt": BFCL_ITEM, "domain": "weather", "answer": "x"},
            {"prompt": BFCL_WRAPPED, "domain": "weather", "answer": "x"},
            {"prompt": "What is the temperature in Oslo right now, in Celsius?",
             "domain": "weather", "answer": "Oslo"}]
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # one generated prompt is made a canary, so the canary source is counted too
    first = taskgen.make("single", 0, namespace="round-1-b0",
                         domains=taskgen.domain_cycle("single", 0))
    suites = build_suites({"single_turn": 2})
    suites[0].items.append(first)
    ctx = RoundContext(cfg=RunConfig(), settings=GroundingSettings(
                           tasks={"single": 3}, task_files=[str(path)]),
                       store=RunStore(tmp_path / "run"), number=1, name="grounding",
                       start_model=tmp_path / "base", decontaminator=decontaminator_for(suites),
                       open_backend=lambda model_dir: nullcontext(), progress=False)
    made = make_tasks(ctx)
    assert len(made) == 4 and made[-1].prompt == rows[2]["prompt"]
    assert first.prompt not in [t.prompt for t in made]
    done = RunStore(tmp_path / "run").state()["rounds"]["1"]["done"]["tasks"]
    assert done["decontaminated"] == 3
    assert done["decontaminated_by"] == {"canary": 1, "bfcl": 2}


def test_a_domain_whose_prompts_collide_keeps_its_share_or_is_reported_short(tmp_path):
    """Each task slot draws from its own domain until a clean task comes: the weather tasks
    that collide with canaries are redrawn as weather tasks (not handed to another domain),
    and a domain with every prompt protected (inventory here) gives up its slots after
    SLOT_TRIES draws, counted under `short` in the step's record."""
    from rounds.common import SLOT_TRIES
    domains = ["weather", "inventory", "units"]
    drawn = [taskgen.make(k, i, namespace="round-1-b0", domains=[d])
             for k, d in (("single", "weather"), ("single", "inventory")) for i in range(300)]
    weather = [t.prompt for t in drawn if t.domain == "weather"][:40]
    inventory = [t.prompt for t in drawn if t.domain == "inventory"]
    suites = build_suites({"single_turn": 2})
    suites[0].items += [t for t in drawn if t.prompt in set(weather) | set(inventory)]
    ctx = RoundContext(cfg=RunConfig(), settings=GroundingSettings(
                           tasks={"single": 9}, domains=domains),
                       store=RunStore(tmp_path / "run"), number=1, name="grounding",
                       start_model=tmp_path / "base",
                       decontaminator=decontaminator_for(suites, bfcl=False),
                       open_backend=lambda model_dir: nullcontext(), progress=False)
    made = make_tasks(ctx)
    by_domain = {d: sum(t.domain == d for t in made) for d in domains}
    # the cycle (inventory, units, weather) gives inventory slots 0, 3, 6, 9, 12, each given
    # up; units and weather take the other slots in turn
    assert len(made) == 9 and by_domain == {"weather": 4, "inventory": 0, "units": 5}
    assert not {t.prompt for t in made} & set(weather)
    done = RunStore(tmp_path / "run").state()["rounds"]["1"]["done"]["tasks"]
    assert done["short"] == {"single@inventory": 5}
    assert done["decontaminated"] >= 5 * SLOT_TRIES


def hermes(task, before: list[dict] = ()) -> dict:
    """A task's oracle as a Hermes teacher row, with earlier turns `before` its prompt."""
    convo = [{"from": "system", "value": task.system}, *before,
             {"from": "human", "value": task.prompt}]
    for m in task.oracle:
        if m["role"] == "assistant":
            convo.append({"from": "gpt", "value": m["content"]})
        else:
            convo.append({"from": "tool",
                          "value": f"<tool_response>\n{m['content']}\n</tool_response>"})
    return {"id": task.id, "tools": json.dumps(task.tools), "conversations": convo}


def test_teacher_rows_are_checked_on_every_user_turn(tmp_path):
    """A teacher row that asked a BFCL question in an earlier turn is dropped, though its
    last question is clean; the round's filter report counts it under bfcl."""
    clean_task, other = taskgen.make("single", 0), taskgen.make("single", 1)
    earlier = [{"from": "human", "value": BFCL_ITEM}, {"from": "gpt", "value": "Noted."}]
    path = tmp_path / "teacher.jsonl"
    path.write_text(json.dumps(hermes(clean_task)) + "\n"
                    + json.dumps(hermes(other, earlier)) + "\n")
    ctx = RoundContext(cfg=RunConfig(), settings=GroundingSettings(
                           teacher={"file": str(path), "verify": "execute"}),
                       store=RunStore(tmp_path / "run"), number=1, name="grounding",
                       start_model=tmp_path / "base",
                       decontaminator=decontaminator_for(build_suites({"single_turn": 2})),
                       open_backend=lambda model_dir: nullcontext(), progress=False)
    rows = teacher_trajectories(ctx, [clean_task, other])
    assert ctx.stats["teacher"]["kept"] == 2  # both well formed and verified
    kept = accept(ctx, rows)
    assert [t.task_id for t in kept] == [clean_task.id] and kept[0].source == "teacher"
    report = next(r for r in ctx.stats["filters"]["accepted"] if r["filter"] == "decontaminate")
    assert report["by_source"] == {"bfcl": 1}
    assert report["dropped"] == {"prompt equals a bfcl prompt": 1}


def test_no_built_in_domain_has_most_of_its_single_requests_in_the_default_canaries():
    """The default preset's canaries (every suite at its largest size) hold under 40 % of the
    train-split single requests of each built-in domain: with one wording over 24 products,
    inventory's were 95 %, so decontamination left training almost no inventory call."""
    from pipeline.config import load
    from gates.gate import suites_for
    cfg = load(preset="default")
    suites = suites_for(cfg, cfg.canaries.largest_sizes(cfg.rounds.values()))
    guard = decontaminator_for(suites, bfcl=False)
    for domain in sorted(BUILTIN):
        hits = sum(bool(guard.hit(taskgen.make("single", i, namespace="probe",
                                               domains=[domain]).prompt)) for i in range(100))
        assert hits < 40, (domain, hits)
