"""Generators are deterministic and sound (every oracle scores 1.0); the verifier catches faults."""
from __future__ import annotations

import json

import random

import pytest

from data import tasks, verify
from data.chatformat import format_call
from data.environment import DomainEnvironment
from data.chatformat import Call


@pytest.mark.parametrize("kind", tasks.KINDS)
def test_oracles_score_one_over_1000_tasks(kind):
    batch = tasks.generate({kind: 1000})
    assert verify.validate(batch) == []
    assert len({t.id for t in batch}) == 1000


def test_tasks_are_deterministic_and_splits_disjoint():
    a, b = tasks.make("chained", 7), tasks.make("chained", 7)
    assert a.model_dump() == b.model_dump()
    train = {tasks.seed_for("train", "default", k, i) for k in tasks.KINDS for i in range(500)}
    canary = {tasks.seed_for("canary", "canary-v1", k, i) for k in tasks.KINDS for i in range(500)}
    assert not train & canary


def test_kinds_have_their_shape():
    chained = tasks.generate({"chained": 200})
    assert all(2 <= t.min_calls <= 5 for t in chained)
    assert max(t.min_calls for t in chained) >= 4
    par = tasks.make("parallel", 0)
    first = par.oracle[0]["content"]
    assert first.count("<tool_call>") == 2
    irr = tasks.make("irrelevance", 0)
    assert irr.answer is None and "<tool_call>" not in irr.oracle[-1]["content"]
    long = tasks.make("long_context", 0, context_tokens=8000)
    assert len(long.tools) >= 20 and len(json.dumps(long.oracle)) > 1000
    rec = [tasks.make("recovery", i) for i in range(40)]
    modes = {t.faults["mode"] for t in rec}
    assert modes >= {"alias", "timeout", "rate_limit"}
    assert all('"error"' in t.oracle[1]["content"] for t in rec)


def _solve(task, turns, final):
    env, msgs = DomainEnvironment.for_task(task), task.messages()
    for calls in turns:
        msgs.append({"role": "assistant", "content": "\n".join(format_call(n, a) for n, a in calls)})
        for n, a in calls:
            msgs.append(env.execute(Call(n, a)).message(Call(n, a)))
    msgs.append({"role": "assistant", "content": final})
    return msgs


def test_verifier_catches_each_fault():
    t = tasks.make("single", 3)
    gold = t.gold_calls[0]
    ok = _solve(t, [[(gold.name, gold.arguments)]], t.oracle[-1]["content"])
    assert verify.verify(t, ok).success
    assert not verify.verify(t, ok, require_plan=True).checks["plan"]
    wrong = _solve(t, [[(gold.name, gold.arguments)]], "The answer is 123456.")
    v = verify.verify(t, wrong)
    assert not v.success and v.checks["answer"] is False and v.score == pytest.approx(0.5)
    halluc = _solve(t, [[("launch_rocket", {})]], t.oracle[-1]["content"])
    v = verify.verify(t, halluc)
    assert not v.checks["valid_calls"] and "unknown tool 'launch_rocket'" in " ".join(v.reasons)
    guess = t.messages() + [{"role": "assistant", "content": t.oracle[-1]["content"]}]
    assert "successful calls" in " ".join(verify.verify(t, guess).reasons)
    unfinished = verify.verify(t, ok, finish="turn_limit")
    assert not unfinished.success and "turn_limit" in unfinished.reasons[0]


def test_loop_is_caught_and_recovery_succeeds():
    t = next(tasks.make("recovery", i) for i in range(50)
             if tasks.make("recovery", i).faults["mode"] == "timeout")
    bad_call = (t.faults["tool"], t.gold_calls[0].arguments)
    looped = _solve(t, [[bad_call], [bad_call], [(t.faults["tool"] + "_backup", bad_call[1])]],
                    t.oracle[-1]["content"])
    v = verify.verify(t, looped)
    assert not v.checks["no_loop"] and not v.success
    assert verify.verify(t, t.messages() + t.oracle).success


def test_irrelevance_and_first_call_metrics():
    t = tasks.make("irrelevance", 2)
    called = _solve(t, [[(t.tools[0]["function"]["name"], {})]], "Here you go.")
    assert not verify.verify(t, called).success
    assert verify.first_call_metrics(t, t.messages() + t.oracle) == {
        "exact": 1.0, "args": 1.0, "name": 1.0, "has_call": 0.0}
    s = tasks.make("single", 5)
    g = s.gold_calls[0]
    other_args = {k: (v + 1 if isinstance(v, (int, float)) else v + "x") for k, v in
                  g.arguments.items()}
    m = verify.first_call_metrics(s, _solve(s, [[(g.name, other_args)]], "x"))
    assert m == {"exact": 0.0, "args": 0.0, "name": 1.0, "has_call": 1.0}


@pytest.mark.parametrize("final, gold, ok", [
    ("It is 21 °C in Paris.", 21, True), ("Total: 1,234.50 EUR", 1234.5, True),
    ("about 99.99", 100.0, True), ("It is 20.", 21, False),
    ("Confirmation cf1234.", "CF1234", True), ("No idea", "CF1234", False)])
def test_answer_matching(final, gold, ok):
    assert verify.answer_matches(final, gold) is ok


def test_domain_cycle_balances_training_tasks():
    from collections import Counter
    made = [tasks.make("chained", i, domains=tasks.domain_cycle("chained", i)) for i in range(12)]
    assert Counter(t.domain for t in made) == {d: 2 for d in tasks.BUILTIN}
    assert all(verify.verify(t, t.messages() + t.oracle).success for t in made)
    assert tasks.domain_cycle("recovery", 7, ["units", "flights"]) == ["units"]
    assert tasks.domain_cycle("reasoning", 3) is None


def test_mismatch_offers_another_domains_tools_and_no_call_is_right():
    batch = [tasks.make("mismatch", i) for i in range(200)]
    single = [t for t in batch if len(t.tools) == 1]
    assert 25 <= len(single) <= 80                  # about SOLO of them, as call tasks
    for t in batch:
        assert t.kind == "irrelevance" and t.answer is None and not t.gold_calls
        # the request is another domain's (the first draw of the task's seed): none of that
        # domain's tools is offered, whatever else is
        asked = random.Random(t.seed).choice(tasks.makers_for("single", sorted(tasks.BUILTIN)))
        names = {x["function"]["name"] for x in t.tools}
        assert asked != t.domain and not names & set(tasks.DOMAINS[asked].tool_names())
        assert "<tool_call>" not in t.oracle[-1]["content"]
        assert t.tools[0]["function"]["name"] in t.oracle[-1]["content"]
    # a call to the offered (wrong) tool fails the task
    t = batch[0]
    tool = t.tools[0]["function"]["name"]
    bad = t.messages() + [{"role": "assistant", "content": "<think>\nx\n</think>\n" +
                           format_call(tool, {})}]
    assert not verify.verify(t, bad).success
    with pytest.raises(ValueError, match="two domains"):
        tasks.make("mismatch", 0, domains=["weather"])


def test_a_request_no_offered_tool_serves_must_be_declined_not_answered():
    """Mismatch and contrast no-call tasks carry `decline`: a made-up result without a call
    (the base model's answer to 24 of round 1's 64 mismatch tasks) fails; saying it cannot
    passes. An off-topic request (a poem) may be answered directly."""
    t = tasks.make("mismatch", 3)
    assert t.decline and t.answer is None
    pair = [tasks.make("contrast", i) for i in (0, 1)]
    assert [p.decline for p in pair] == [False, True]

    def said(task, text):
        return verify.verify(task, task.messages() + [{"role": "assistant", "content": text}])
    made_up = said(t, "The cheapest fare from DUB to SYD was approximately $5.05.")
    assert not made_up.success and "made-up answer" in made_up.reasons[0]
    for ok in ("I cannot do that with the tools I have.", "None of the available tools fits.",
               "Sorry, there is no tool for the weather here.", t.oracle[-1]["content"]):
        assert said(t, ok).success, ok
    poem = next(x for x in (tasks.make("irrelevance", i) for i in range(40))
                if x.domain != "synthetic" and not x.decline)
    assert said(poem, "Here is a poem about the sea.").success


@pytest.mark.parametrize("kind", ["irrelevance", "mismatch", "reasoning", "single", "chained"])
def test_every_oracle_first_turn_thinks_first(kind):
    """No-call oracles think before answering, as call oracles do: a first turn that skips
    the plan would teach "no think, then no call" as a shortcut past the decision."""
    for t in tasks.generate({kind: 30}):
        first = t.oracle[0]["content"]
        assert first.startswith("<think>\n") and "\n</think>\n" in first, (t.id, first)
        if kind in ("irrelevance", "mismatch", "reasoning"):
            assert len(t.oracle) == 1 and "<tool_call>" not in first
    synthetic = tasks.generate({"irrelevance@synthetic": 10})
    assert all(t.oracle[0]["content"].startswith("<think>\n") for t in synthetic)
