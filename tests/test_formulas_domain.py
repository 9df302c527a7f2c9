"""The formulas domain: calculators a model thinks it can do without (areas, interest, GCD),
offered with near misses; oracles verify through the real tools; irrelevance items offer only
calculators that compute something else; it never stands beside another domain's request, so
the canaries' tool mixes do not change."""
from __future__ import annotations

import random

import pytest

from data import tasks as taskgen
from data.envs import BUILTIN, SHIPPED, ToolError, problems
from data.envs.formulas import BY_NAME, DOMAIN, FORMULAS, irrelevance, single
from gates.canaries import builtin_suite


def test_shipped_not_built_in_and_well_formed():
    assert "formulas" in SHIPPED and "formulas" not in BUILTIN
    assert problems(DOMAIN) == []
    assert len(DOMAIN.tools) == len(FORMULAS) >= 30


def test_every_kind_verifies_through_the_real_tools():
    assert taskgen.validate_domain("formulas", per_kind=25) == []


def test_tools_compute_and_check_their_arguments():
    assert DOMAIN.call("calcTriangleArea", {"base": 10, "height": 5}) == {"result": 25.0}
    assert DOMAIN.call("gcd_of", {"a": 36, "b": 48}) == {"result": 12.0}
    assert DOMAIN.call("geometry.circle_area", {"radius": 2})["result"] == pytest.approx(12.5664)
    with pytest.raises(ToolError, match="radius: '2 cm' is not of type 'number'"):
        DOMAIN.call("geometry.circle_area", {"radius": "2 cm"})
    with pytest.raises(ToolError, match="a: 3.5 is not of type 'integer'"):
        DOMAIN.call("gcd_of", {"a": 3.5, "b": 2})
    with pytest.raises(ToolError, match="'b' is a required property"):
        DOMAIN.call("gcd_of", {"a": 3})
    with pytest.raises(ToolError, match="numbers: \\[\\] should be non-empty"):
        DOMAIN.call("stats_mean", {"numbers": []})


def test_single_offers_the_fitting_formula_among_near_misses_and_irrelevance_none():
    for seed in range(50):
        ex = single(random.Random(seed))
        (name, args), = ex.steps[0]
        offered = [t["function"]["name"] for t in ex.tools]
        assert name in offered and 3 <= len(offered) <= 6
        assert all(str(v) in ex.prompt for v in args.values() if not isinstance(v, list))
        asked = random.Random(seed).choice(FORMULAS)   # the maker's first draw
        no = irrelevance(random.Random(seed))
        names = [t["function"]["name"] for t in no.tools]
        assert no.steps == [] and no.answer is None and asked.name not in names
        assert all(n in BY_NAME for n in names) and "None of the available tools" in no.final


def test_never_a_distractor_of_another_domain():
    tasks = [taskgen.make(k, i, "train", "t", ["weather", "currency"], offered_tools=12)
             for k in ("single", "mismatch", "irrelevance") for i in range(30)]
    offered = {t["function"]["name"] for task in tasks for t in task.tools}
    assert not offered & set(BY_NAME)
    suite = builtin_suite("many_tools", 120, "v2")
    assert not {t["function"]["name"] for task in suite.items for t in task.tools} \
        & set(BY_NAME)


def test_a_round_that_names_it_gets_calls_and_no_calls_over_its_tools():
    calls = [taskgen.make("single", i, "train", "f", ["formulas"], offered_tools=12)
             for i in range(20)]
    nocalls = [taskgen.make("mismatch", i, "train", "f", ["formulas", "weather"],
                            offered_tools=12) for i in range(20)]
    assert all(t.domain == "formulas" and t.gold_calls for t in calls)
    assert all(not t.gold_calls and t.kind == "irrelevance" for t in nocalls)
    # a weather request is offered calculators, a calculation weather tools: no call either way
    assert {t.domain for t in nocalls} == {"formulas", "weather"}
