"""Both sides of the call-or-abstain choice: offered tool sets mix fitting tools with other
domains' tools in every kind (so a stranger in the list predicts nothing), the many_tools canary
scores right calls and right abstentions apart, and the gate never holds a round to a model
whose abstention score comes from never calling."""
from collections import Counter

import pytest

from data import tasks
from data.envs import DOMAINS
from data.trajectory import Trajectory, Verification
from data.verify import validate
from gates.canaries import builtin_suite
from gates.evaluate import score_suite
from gates.promote import decide, never_calls
from pipeline import config
from pipeline.config import GateSettings

CALL_KINDS = ("single", "parallel", "chained", "recovery")


def names(task):
    return [t["function"]["name"] for t in task.tools]


def foreign(task) -> int:
    """Offered tools that belong to no tool of the task's own domain."""
    own = set(DOMAINS[task.domain].tool_names())
    return sum(n.removesuffix("_backup") not in own for n in names(task))


@pytest.mark.parametrize("kind", CALL_KINDS + ("mismatch", "irrelevance"))
def test_every_kind_offers_a_mix_with_unique_names_and_sound_oracles(kind):
    ts = [tasks.make(kind, i, offered_tools=8) for i in range(200)]
    assert validate(ts) == []                      # oracles stay correct by construction
    for t in ts:
        assert len(set(names(t))) == len(names(t)), t.id
        assert len(t.tools) <= 8 + (kind == "recovery")  # recovery adds its backup endpoint
    if kind in CALL_KINDS:
        # the needed tools are always there, and most tasks also offer other domains' tools
        for t in ts:
            assert {g.name for g in t.gold_calls} <= set(names(t))
        assert sum(foreign(t) > 0 for t in ts) >= 0.5 * len(ts)
    sizes = Counter(len(t.tools) for t in ts)
    assert len(sizes) >= 4, sizes                  # a spread of counts, not one fixed size


def test_a_foreign_tool_does_not_predict_no_call():
    """The shortcut the old mix taught: 'some offered tool does not fit' -> no call. Among tasks
    offering a tool of another domain, calls must outnumber abstentions in a call-heavy mix."""
    mix = {"single": 30, "chained": 30, "recovery": 20, "mismatch": 30}
    ts = tasks.generate(mix, offered_tools=6)
    with_foreign = [t for t in ts if foreign(t) > 0]
    calls = sum(t.answer is not None for t in with_foreign)
    assert calls / len(with_foreign) >= 0.6
    # and no-call tasks are as crowded as call tasks (the count carries no signal)
    mean = lambda xs: sum(xs) / len(xs)
    no_call = [len(t.tools) for t in ts if t.answer is None]
    call = [len(t.tools) for t in ts if t.answer is not None]
    assert abs(mean(no_call) - mean(call)) < 1.5


def test_many_tools_canary_has_one_fitting_tool_or_none():
    s = builtin_suite("many_tools", 120, version="v2")
    call = [t for t in s.items if t.gold_calls]
    none = [t for t in s.items if not t.gold_calls]
    assert (len(call), len(none)) == (80, 40)
    for t in s.items:
        assert 6 <= len(t.tools) <= 12, (t.id, len(t.tools))
        assert len(set(names(t))) == len(names(t))
        own = set(DOMAINS[t.domain].tool_names())
        offered_own = [n for n in names(t) if n in own]
        if t.gold_calls:   # exactly the one fitting tool of the request's domain
            assert offered_own == [t.gold_calls[0].name], (t.id, offered_own)
        else:              # no tool of the request's domain at all
            assert offered_own == [], (t.id, offered_own)
        assert len({d for d in DOMAINS for n in names(t) if n in DOMAINS[d].tool_names()}) >= 2
    assert validate(s.items) == []
    assert len({t.domain for t in call}) >= 6      # every built-in domain asks


def _traj(task, text: str, tool_result: str | None = None, final: str | None = None):
    msgs = task.messages() + [{"role": "assistant", "content": text}]
    if tool_result is not None:
        msgs += [{"role": "tool", "name": "x", "content": tool_result, "ok": True},
                 {"role": "assistant", "content": final or "done"}]
    return Trajectory(id=f"{task.id}-0", task_id=task.id, domain=task.domain, kind=task.kind,
                      messages=msgs, tools=task.tools, finish="answer",
                      verification=Verification(score=0.0, success=False, reasons=[],
                                                checks={}))


def test_many_tools_scores_calls_and_abstentions_apart():
    from data.chatformat import format_call
    s = builtin_suite("many_tools", 6, version="v2")   # items 2 and 5 offer no fitting tool
    trajs = []
    for i, t in enumerate(s.items):
        if t.gold_calls:
            g = t.gold_calls[0]
            args = g.arguments if i == 0 else {**g.arguments, "zz_wrong": 1}  # item 0 right
            trajs.append(_traj(t, format_call(g.name, args), '{"ok": 1}', "ok"))
        else:
            trajs.append(_traj(t, "No offered tool does this." if i == 2 else
                               format_call(names(t)[0], {})))     # item 5 calls anyway
    table = score_suite(s, trajs, k=1)
    m = table["metrics"]
    assert m["calls"] == pytest.approx(1 / 4)        # 1 right call of 4 call items
    assert m["abstentions"] == pytest.approx(1 / 2)  # 1 right abstention of 2
    assert m["correct"] == pytest.approx(2 / 6)
    assert table["primary"] == "correct"
    assert set(table["items"][s.items[2].id]) == {"correct", "abstentions"}


def _suite(metric, values, extra=None, scorer=None):
    items = {f"i{i}": {metric: v, **(extra or {})} for i, v in enumerate(values)}
    out = {"hash": "h", "primary": metric, "n_items": len(values), "items": items,
           "metrics": {metric: sum(values) / len(values), **{k: v for k, v in (extra or {}).items()}}}
    if scorer:
        out["scorer"] = scorer
    return out


def _report(single_has_call: float, single, irr):
    return {"k": 1, "suites": {
        "single_turn": _suite("exact", single, {"has_call": single_has_call}),
        "bfcl_irrelevance": _suite("accuracy", irr)}}


def test_no_drop_on_abstention_is_waived_only_against_a_model_that_never_calls():
    base = _report(0.0, [0] * 20, [1] * 20)             # never calls: irrelevance 1.00
    cand = _report(1.0, [1] * 12 + [0] * 8, [1] * 16 + [0] * 4)   # calls; irrelevance 0.80
    assert never_calls(base["suites"]) and not never_calls(cand["suites"])
    th = GateSettings(floors={"bfcl_irrelevance": 0.8})
    d = decide(cand, base, th, target="single_turn")
    nd = {r.canary: r for r in d.rules if r.name == "no-drop"}
    assert nd["bfcl_irrelevance"].passed and "waived" in nd["bfcl_irrelevance"].detail
    assert d.promote
    # the floor still holds: 0.75 < 0.80 refuses
    low = _report(1.0, [1] * 12 + [0] * 8, [1] * 15 + [0] * 5)
    d2 = decide(low, base, th, target="single_turn")
    assert not d2.promote and [r.name for r in d2.failures()] == ["floor"]
    # against a baseline that calls, the same drop is an ordinary 2-SE no-drop failure
    calling_base = _report(1.0, [0] * 20, [1] * 20)
    d3 = decide(cand, calling_base, th, target="single_turn")
    assert "no-drop" in [r.name for r in d3.failures()]


def test_anchored_rule_warns_when_the_base_never_calls():
    base = _report(0.0, [0] * 20, [1] * 20)
    cand = _report(1.0, [1] * 12 + [0] * 8, [1] * 20)
    d = decide(cand, base, GateSettings(anchored=["bfcl_irrelevance"]), target="single_turn",
               anchor=base)
    (a,) = [r for r in d.rules if r.name == "anchor"]
    assert "comes from abstention" in a.detail


def test_default_gate_watches_both_sides_and_anchors_nothing():
    cfg = config.load(None, "default", [])
    assert cfg.gate.anchored == []
    assert cfg.gate.floors["bfcl_irrelevance"] == pytest.approx(0.8)
    assert cfg.canaries.bfcl["simple_python"] >= 50 and cfg.canaries.bfcl["multiple"] >= 50
    assert cfg.canaries.bfcl["irrelevance"] >= 50
    assert cfg.canaries.sizes["many_tools"] >= 100
    for _, _, rs in cfg.planned_rounds():     # every gate sees many_tools
        assert cfg.canaries.size("many_tools", rs) >= 100


def test_offered_tools_per_kind_sizes_each_kinds_offers_and_refuses_strays(tmp_path):
    """A round may give one-call kinds room for more tools (`offered_tools: {single: 10}`);
    kinds it does not name keep the default; a key naming no kind of the round is refused."""
    from contextlib import nullcontext

    from engine.runstore import RunStore
    from gates.canaries import build_suites
    from gates.decontamination import decontaminator_for
    from pipeline.config import RunConfig
    from rounds.common import RoundContext, make_tasks
    from rounds.grounding import GroundingSettings

    settings = GroundingSettings(tasks={"single": 60, "chained": 60, "mismatch": 60},
                                 offered_tools={"single": 10, "mismatch": 10})
    assert [settings.offer_for(k) for k in ("single", "single@synthetic", "chained")] == \
        [10, 10, tasks.OFFERED]
    ctx = RoundContext(cfg=RunConfig(), settings=settings, store=RunStore(tmp_path / "run"),
                       number=1, name="grounding", start_model=tmp_path / "base",
                       decontaminator=decontaminator_for(build_suites({"single_turn": 2})),
                       open_backend=lambda model_dir: nullcontext(), progress=False)
    made = make_tasks(ctx)
    most = {k: max(len(t.tools) for t in made if t.id.split("-")[-2] == k)
            for k in ("single", "chained", "mismatch")}
    assert most["single"] > tasks.OFFERED and most["mismatch"] > tasks.OFFERED
    assert most["single"] <= 10 and most["chained"] <= tasks.OFFERED
    with pytest.raises(ValueError, match=r"\['singel'\] name no kind"):
        GroundingSettings(tasks={"single": 2}, offered_tools={"singel": 10})
    with pytest.raises(ValueError, match="1 to 24 tools"):
        GroundingSettings(tasks={"single": 2}, offered_tools={"single": 30})


def test_contrast_pairs_differ_only_by_the_serving_tool():
    """Tasks 2i and 2i+1 of `contrast`: one request, as many offered tools, the same strangers;
    the call task offers the tool its gold call names, the no-call one no tool of the request's
    domain; both oracles verify."""
    domains = ["weather", "currency", "flights", "synthetic", "formulas"]
    made = [tasks.make("contrast", i, "train", "c", domains, offered_tools=10) for i in range(40)]
    assert validate(made) == []
    for call, none in zip(made[::2], made[1::2]):
        assert call.prompt == none.prompt and call.domain == none.domain
        assert len(call.tools) == len(none.tools)
        assert call.kind == "single" and none.kind == "irrelevance" and not none.gold_calls
        gold = call.gold_calls[0].name
        assert gold in names(call) and gold not in names(none)
        assert not set(names(none)) & set(DOMAINS[none.domain].tool_names())
        shared = set(names(call)) & set(names(none))
        assert len(shared) == len(call.tools) - 1
    assert len({t.domain for t in made}) >= 4
    solo = [c for c in made[::2] if len(c.tools) == 1]   # BFCL simple's shape: one tool, it fits
    assert 2 <= len(solo) <= 12
    pinned = [tasks.make("contrast@formulas", i, "train", "c", None, offered_tools=8)
              for i in range(6)]
    assert {t.domain for t in pinned} == {"formulas"}
