"""The promote decision on hand-made evaluation reports: win, tie, regression, floor breach."""
import math

import pytest

from gates.promote import decide
from pipeline.config import GateSettings

PRIMARY = {"multi_turn": "success", "single_turn": "exact", "reasoning": "accuracy"}


def suite(name: str, values: list[float], h: str = "h1") -> dict:
    m = PRIMARY[name]
    items = {f"{name}-{i}": {m: v} for i, v in enumerate(values)}
    return {"version": "v1", "hash": h, "primary": m, "n_items": len(values),
            "metrics": {m: sum(values) / len(values)}, "items": items}


def report(**suites) -> dict:
    return {"k": 1, "suites": {n: suite(n, v) for n, v in suites.items()}}


BASE = report(multi_turn=[0, 0, 1, 0, 1, 0, 0, 0, 1, 0],
              single_turn=[1, 1, 0, 1, 1, 0, 1, 1, 1, 0],
              reasoning=[0.5, 0.5, 0.0, 1.0, 0.5, 0.5, 0.0, 0.5, 1.0, 0.5])


def rules(decision, name):
    return [r for r in decision.rules if r.name == name]


def test_clear_win_promotes():
    cand = report(multi_turn=[1, 1, 1, 1, 1, 0, 1, 1, 1, 1],
                  single_turn=[1, 1, 0, 1, 1, 0, 1, 1, 1, 0],
                  reasoning=[0.5, 0.5, 0.0, 1.0, 0.5, 0.5, 0.0, 0.5, 1.0, 0.5])
    d = decide(cand, BASE, GateSettings(), target="multi_turn")
    # multi_turn d = [1,1,0,1,0,0,1,1,0,1]: mean 0.6, var = (6*0.16 + 4*0.36)/9 = 2.4/9,
    # SE = sqrt(2.4/9/10) = 0.1633; needs 2 x 0.1633 = 0.3266 <= 0.6
    t = rules(d, "target")[0]
    assert t.passed and d.promote and not d.forced and d.passed
    assert d.target == "multi_turn.success"
    p = d.comparisons["multi_turn"]["success"]
    assert p.delta == pytest.approx(0.6)
    assert p.se == pytest.approx(math.sqrt(2.4 / 90))
    assert "+0.600" in t.detail and "0.327" in t.detail and "6 wins / 0 losses" in t.detail
    assert all(r.passed for r in rules(d, "no-drop"))


def test_tie_does_not_promote():
    d = decide(BASE, BASE, GateSettings(), target="multi_turn.success")
    t = rules(d, "target")[0]
    assert not t.passed and not d.promote
    assert "delta +0.000" in t.detail and "needs > 0" in t.detail
    assert [r.name for r in d.failures()] == ["target"]  # nothing else fails on a tie


def test_small_gain_within_noise_does_not_promote():
    cand = report(multi_turn=[1, 0, 1, 0, 1, 0, 0, 0, 1, 1],  # one more success, one flipped
                  single_turn=[1, 1, 0, 1, 1, 0, 1, 1, 1, 0],
                  reasoning=[0.5, 0.5, 0.0, 1.0, 0.5, 0.5, 0.0, 0.5, 1.0, 0.5])
    d = decide(cand, BASE, GateSettings(), target="multi_turn")
    # d = [1,0,0,0,0,0,0,0,0,1] -> mean 0.2, SE = sqrt((2*0.64 + 8*0.04)/9/10) = 0.1333
    p = d.comparisons["multi_turn"]["success"]
    assert p.se == pytest.approx(math.sqrt(1.6 / 90))
    assert not d.promote
    assert "needs > 0 and >= 2 x SE 0.133 = 0.267" in rules(d, "target")[0].detail


def test_regression_on_another_canary_blocks():
    cand = report(multi_turn=[1] * 10,
                  single_turn=[0, 0, 0, 1, 0, 0, 1, 0, 0, 0],   # 0.7 -> 0.2
                  reasoning=[0.5, 0.5, 0.0, 1.0, 0.5, 0.5, 0.0, 0.5, 1.0, 0.5])
    d = decide(cand, BASE, GateSettings(), target="multi_turn")
    assert rules(d, "target")[0].passed
    drop = next(r for r in rules(d, "no-drop") if r.canary == "single_turn")
    # d = [-1,-1,0,0,-1,0,0,-1,-1,0]: mean -0.5, var = 10*0.25/9, SE = sqrt(2.5/90) = 0.1667
    # tolerance = max(2 x 0.1667, 0.02) = 0.333 < 0.5 -> fail
    assert not drop.passed
    assert "delta -0.500" in drop.detail and "tolerance -0.333" in drop.detail
    assert not d.promote
    assert [r.canary for r in d.failures()] == ["single_turn"]


def test_absolute_tolerance_wins_when_se_is_small():
    cand = report(multi_turn=[1] * 10, single_turn=[1, 1, 0, 1, 1, 0, 1, 1, 1, 0],
                  reasoning=[0.4, 0.4, 0.0, 1.0, 0.5, 0.5, 0.0, 0.5, 1.0, 0.5])
    # reasoning d = [-0.1, -0.1, 0 ...]: mean -0.02; SE = sqrt((2*0.0064 + 8*0.0004)/9/10)=0.0133
    # 2 SE = 0.0267 > abs 0.02 -> passes; with drop_se=0 and drop_abs 0.01 it fails
    assert decide(cand, BASE, GateSettings(), "multi_turn").promote
    strict = GateSettings(drop_se=0.0, drop_abs={"reasoning": 0.01})
    d = decide(cand, BASE, strict, "multi_turn")
    bad = d.failures()
    assert [(r.name, r.canary) for r in bad] == [("no-drop", "reasoning")]
    assert "tolerance -0.010" in bad[0].detail


def test_floor_breach_blocks_and_force_promotes_anyway():
    cand = report(multi_turn=[1] * 10, single_turn=[1, 1, 0, 1, 1, 0, 1, 1, 1, 0],
                  reasoning=[0.5, 0.5, 0.0, 1.0, 0.5, 0.5, 0.0, 0.5, 1.0, 0.5])
    th = GateSettings(floors={"reasoning": 0.6, "single_turn": 0.5})
    d = decide(cand, BASE, th, "multi_turn")
    floors = {r.canary: r for r in rules(d, "floor")}
    assert not floors["reasoning"].passed and floors["single_turn"].passed
    assert "candidate 0.500 vs floor 0.600" in floors["reasoning"].detail
    assert not d.promote
    forced = decide(cand, BASE, th, "multi_turn", force=True)
    assert forced.promote and forced.forced and not forced.passed


def test_changed_suite_is_not_compared():
    cand = report(multi_turn=[1] * 10, single_turn=[1] * 10, reasoning=[1.0] * 10)
    cand["suites"]["single_turn"]["hash"] = "other"
    d = decide(cand, BASE, GateSettings(), "multi_turn")
    bad = [r for r in d.failures()]
    assert [(r.name, r.canary) for r in bad] == [("same-items", "single_turn")]
    assert "hash differs" in bad[0].detail and not d.promote


def test_unknown_target_fails_with_names():
    d = decide(BASE, BASE, GateSettings(), "recovery")
    t = rules(d, "target")[0]
    assert not t.passed and "multi_turn" in t.detail


def test_thresholds_reject_nonsense():
    with pytest.raises(ValueError, match="keep_se"):
        GateSettings(keep_se=-1)
    with pytest.raises(ValueError, match="floors"):
        GateSettings(floors={"reasoning": 2.0})


def test_different_k_is_refused():
    cand = report(multi_turn=[1] * 10, single_turn=[1] * 10, reasoning=[1.0] * 10)
    cand["k"] = 4
    d = decide(cand, BASE, GateSettings(), "multi_turn")
    assert [r.name for r in d.failures()] == ["same-items"]
    assert "k=1, candidate k=4" in d.failures()[0].detail


def test_allow_tie_only_on_a_relaxed_gate():
    with pytest.raises(ValueError, match="allow_tie needs gate.relaxed"):
        GateSettings(allow_tie=True)
    d = decide(BASE, BASE, GateSettings(relaxed=True, allow_tie=True), "multi_turn")
    assert d.promote and "ties allowed: relaxed" in rules(d, "target")[0].detail
    assert d.to_dict()["thresholds"]["allow_tie"] is True


def test_anchored_canary_is_held_to_the_base_model_not_only_the_previous_round():
    """Base 1.00 (20 items), the promoted round 0.90, the candidate 0.80: against the
    promoted model it lost 2 items (-0.10, 2 SE 0.138: no-drop passes); against the base
    it lost 4 (-0.20, 2 SE 0.184): the anchor rule refuses it."""
    ones = [1.0] * 20
    base = report(multi_turn=[0] * 20, single_turn=ones)
    promoted = report(multi_turn=[0] * 20, single_turn=[0, 0] + ones[2:])
    cand = report(multi_turn=[1] * 10 + [0] * 10, single_turn=[0, 0, 0, 0] + ones[4:])
    plain = decide(cand, promoted, GateSettings(), target="multi_turn", anchor=base)
    assert plain.promote and rules(plain, "anchor") == []  # nothing anchored: no rule
    th = GateSettings(anchored=["single_turn"])
    d = decide(cand, promoted, th, target="multi_turn", anchor=base)
    assert [r.passed for r in rules(d, "no-drop") if r.canary == "single_turn"] == [True]
    (a,) = rules(d, "anchor")
    # d = four -1 and sixteen 0: mean -0.2, var (4 x 0.64 + 16 x 0.04) / 19 = 3.2 / 19,
    # SE sqrt(3.2 / 19 / 20) = 0.0918, tolerance 0.184
    assert not a.passed and not d.promote
    assert "1.000 -> 0.800, delta -0.200, tolerance -0.184" in a.detail
    assert "0 wins / 4 losses over 20 items" in a.detail
    # a round whose own drop_abs tolerates the drop from the base (round 1) passes it
    loose = decide(cand, promoted, th.model_copy(update={"drop_abs": {"single_turn": 0.6}}),
                   target="multi_turn", anchor=base)
    assert rules(loose, "anchor")[0].passed
    # no base evaluation to hold it to: refused, with what to do
    (missing,) = rules(decide(cand, promoted, th, target="multi_turn"), "anchor")
    assert not missing.passed and "gate.anchored" in missing.detail
    with pytest.raises(ValueError, match="anchored"):
        GateSettings(anchored=["no_such_canary"])
