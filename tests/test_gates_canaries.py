"""Canary suites: fixed, versioned, disjoint from training; per-item scoring of each canary."""
import importlib.util
import json
from pathlib import Path

import pytest

from data.tasks import generate
from data.trajectory import Trajectory
from data.verify import verify
from gates.canaries import (CANARY_KINDS, bfcl_suite, build_suites, canary_prompts,
                            gsm8k_suite)
from gates.evaluate import score_item, score_suite

SIZES = {"reasoning": 3, "recovery": 3, "single_turn": 4, "multi_turn": 3, "irrelevance": 3}
HERE = Path(__file__).parent / "data"


def traj(task, assistant_turns_and_tools, sample=0, finish="answer"):
    msgs = task.messages() + assistant_turns_and_tools
    return Trajectory(id=f"{task.id}#{sample}", task_id=task.id, domain=task.domain,
                      kind=task.kind, sample=sample, messages=msgs, tools=task.tools,
                      finish=finish, verification=verify(task, msgs, finish=finish))


def oracle(task, sample=0):
    return traj(task, task.oracle, sample)


def test_suites_are_fixed_versioned_and_held_out():
    a, b = build_suites(SIZES), build_suites(SIZES)
    assert [s.hash for s in a] == [s.hash for s in b]          # same version, same items
    v2 = build_suites(SIZES, version="v2")
    assert all(x.hash != y.hash for x, y in zip(a, v2))        # a new version, new items
    single = next(s for s in a if s.name == "single_turn")
    assert [t.kind for t in single.items] == ["single", "parallel", "single", "parallel"]
    for s in a:
        assert len(s.items) == SIZES[s.name]
        assert {t.kind for t in s.items} <= set(CANARY_KINDS[s.name])
    train = generate({k: 40 for k in ("single", "parallel", "chained", "irrelevance",
                                      "recovery", "reasoning")})
    prompts = canary_prompts(a)
    assert len(prompts) == len(set(prompts)) and len(prompts) >= 12
    assert not {t.seed for s in a for t in s.items} & {t.seed for t in train}
    assert not {t.id for s in a for t in s.items} & {t.id for t in train}


def test_oracles_score_one_on_every_canary():
    for s in build_suites(SIZES):
        result = score_suite(s, [oracle(t) for t in s.items], k=1)
        assert all(v == 1.0 for v in result["metrics"].values()), (s.name, result["metrics"])
        assert result["primary"] == s.primary and result["hash"] == s.hash
        assert set(result["items"]) == {t.id for t in s.items}


def test_metrics_average_over_k_and_pass_at_k():
    s = next(x for x in build_suites(SIZES) if x.name == "multi_turn")
    t = s.items[0]
    wrong = traj(t, [{"role": "assistant", "content": "I do not know."}], sample=1)
    assert score_item(s, t, [oracle(t), wrong]) == {"success": 0.5, "pass@k": 1.0}
    assert score_item(s, t, [wrong, wrong]) == {"success": 0.0, "pass@k": 0.0}


def test_irrelevance_counts_answers_without_calls():
    s = next(x for x in build_suites(SIZES) if x.name == "irrelevance")
    t = s.items[0]
    tool = t.tools[0]["function"]["name"]
    called = traj(t, [{"role": "assistant",
                       "content": f'<tool_call>\n{{"name": "{tool}", "arguments": {{}}}}\n'
                                  "</tool_call>"}], finish="parse_error")
    empty = traj(t, [{"role": "assistant", "content": ""}], sample=2)
    cut = traj(t, [{"role": "assistant", "content": "Here is a po"}], sample=3,
               finish="token_limit")  # cut at max_tokens: not an answer
    assert score_item(s, t, [oracle(t), called, empty, cut]) == {"no_call": 0.25}


def test_recovery_needs_success_without_loop():
    s = next(x for x in build_suites(SIZES) if x.name == "recovery")
    t = s.items[0]
    assert score_item(s, t, [oracle(t)]) == {"recovery_rate": 1.0, "pass@k": 1.0}
    first_call = t.oracle[:2]  # the failing call and its error, then give up
    gave_up = traj(t, first_call + [{"role": "assistant", "content": "The tool failed."}])
    assert score_item(s, t, [gave_up]) == {"recovery_rate": 0.0, "pass@k": 0.0}


def test_single_turn_metrics_of_first_call():
    s = next(x for x in build_suites(SIZES) if x.name == "single_turn")
    t = s.items[0]
    gold = t.gold_calls[0]
    wrong_args = {k: "zzz" for k in gold.arguments}
    turn = {"role": "assistant", "content": "<tool_call>\n" + json.dumps(
        {"name": gold.name, "arguments": wrong_args}) + "\n</tool_call>"}
    got = score_item(s, t, [traj(t, [turn], finish="turn_limit")])
    assert got == {"exact": 0.0, "args": 0.0, "name": 1.0, "has_call": 1.0}


def test_bfcl_file_suite_scores_with_the_ast_checker():
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None:
        pytest.skip("bfcl-eval is not installed (pip install --no-deps bfcl-eval)")
    d = Path(list(spec.submodule_search_locations)[0]) / "data"
    s = bfcl_suite("bfcl_parallel", d / "BFCL_v4_parallel.json",
                   d / "possible_answer/BFCL_v4_parallel.json", limit=4)
    assert s.scorer == "bfcl" and len(s.items) == 4 and len(s.truth) == 4
    assert score_suite(s, [oracle(t) for t in s.items], 1)["metrics"] == {
        "exact": 1.0, "args": 1.0, "name": 1.0, "has_call": 1.0}
    t = s.items[0]  # only the first of the two expected calls: names differ, nothing exact
    half = {"role": "assistant", "content": t.oracle[0]["content"].split("\n<tool_call>")[0]}
    assert score_item(s, t, [traj(t, [half], finish="turn_limit")]) == {
        "exact": 0.0, "args": 0.0, "name": 0.0, "has_call": 1.0}
    irr = bfcl_suite("bfcl_irrelevance", d / "BFCL_v4_irrelevance.json", limit=3)
    assert irr.scorer == "irrelevance" and irr.primary == "no_call"
    assert s.items[0].prompt in canary_prompts([s, irr])


def test_gsm8k_file_suite():
    s = gsm8k_suite("gsm8k", HERE / "gsm8k_sample.jsonl", limit=3)
    assert (s.scorer, s.primary, len(s.items)) == ("reasoning", "accuracy", 3)
    assert score_suite(s, [oracle(t) for t in s.items], 1)["metrics"]["accuracy"] == 1.0
