"""The AST-style call checker: each BFCL rule, and every real BFCL answer passing itself."""
import importlib.util
from pathlib import Path

import pytest

from data.chatformat import Call
from data.loaders import bfcl_tools, load_bfcl
from gates.ast_check import check, check_call, first_accepted, normalise

DOC = [{"name": "book", "description": "", "parameters": {"type": "dict", "properties": {
    "city": {"type": "string"}, "nights": {"type": "integer"}, "budget": {"type": "float"},
    "tags": {"type": "array", "items": {"type": "string"}}, "late": {"type": "boolean"},
    "prefs": {"type": "dict", "properties": {"floor": {"type": "integer"}}}},
    "required": ["city", "nights"]}}]
GT = {"book": {"city": ["New York, NY", "NYC"], "nights": [3], "budget": [200.0, ""],
               "tags": [["quiet", "sea view"], ""], "late": ["", False],
               "prefs": [{"floor": [2, 3]}, ""]}}


def errs(args, name="book", **kw):
    return check_call({"name": name, "arguments": args}, GT, DOC, **kw)


def test_rules_one_by_one():
    assert errs({"city": "new york ny", "nights": 3}) == []          # normalised string
    assert errs({"city": "NewYork,NY", "nights": 3, "budget": 200}) == []  # int -> float
    assert errs({"city": "NYC", "nights": 3, "late": False}) == []    # second accepted value
    assert errs({"city": "NYC", "nights": 3}, name="Book")[0].startswith("wrong name")
    assert errs({"city": "NYC", "nights": 3}, name="Book", check_name=False) == []
    assert "missing required parameter 'nights'" in errs({"city": "NYC"})[0]
    assert "unexpected parameter 'pets'" in errs({"city": "NYC", "nights": 3, "pets": 1})[0]
    assert "type str, expected integer" in errs({"city": "NYC", "nights": "3"})[0]  # no coercion
    assert "type float, expected integer" in errs({"city": "NYC", "nights": 3.0})[0]
    assert "type bool" in errs({"city": "NYC", "nights": True})[0]    # bool is not an int
    assert "is not one of" in errs({"city": "Boston", "nights": 3})[0]
    assert errs({"city": "NYC", "nights": 3, "tags": ["Quiet", "sea-view"]}) == []
    assert errs({"city": "NYC", "nights": 3, "tags": ["sea view", "quiet"]})  # order matters
    assert errs({"city": "NYC", "nights": 3, "prefs": {"floor": 3}}) == []
    assert errs({"city": "NYC", "nights": 3, "prefs": {"floor": 4}})
    assert errs({"city": "NYC", "nights": 3, "prefs": {"view": 1}})   # key not accepted


def test_non_optional_ground_truth_parameter_must_be_present():
    gt = {"book": {"city": ["NYC"], "nights": [3], "late": [True]}}  # late: no "" -> needed
    bad = check_call({"name": "book", "arguments": {"city": "NYC", "nights": 3}}, gt, DOC)
    assert "missing parameter 'late'" in bad[0]


def test_variable_escape_compares_by_equality():
    gt = {"book": {"city": ["NYC"], "nights": [None, ""]}}  # accepted null where doc says int
    call = {"name": "book", "arguments": {"city": "NYC", "nights": None}}
    assert check_call(call, gt, DOC) == []


def test_call_counts_and_parallel_order():
    gt = [{"book": {"city": ["NYC"], "nights": [1]}}, {"book": {"city": ["Rome"], "nights": [2]}}]
    a, b = Call("book", {"city": "NYC", "nights": 1}), Call("book", {"city": "Rome", "nights": 2})
    assert check([b, a], gt, DOC).valid                       # order is free
    assert not check([a], gt, DOC).valid
    assert "wrong number of calls" in check([a, b, a], gt, DOC).errors[0]
    assert not check([a, a], gt, DOC).valid                   # duplicates do not cover both
    assert check([], [], DOC).valid                           # nothing expected, nothing made


def test_openai_form_tools_check_the_same():
    tools = bfcl_tools(DOC)  # converted types: number, object, array ...
    call = {"name": "book", "arguments": {"city": "NYC", "nights": 3, "budget": 200,
                                          "prefs": {"floor": 2}}}
    assert check_call(call, GT, tools) == []


def test_normalise_matches_bfcl():
    assert normalise("New York, NY") == normalise("newyork ny") == "newyorkny"
    assert normalise("it's") == 'it"s'


@pytest.mark.parametrize("category", ["simple_python", "multiple", "parallel",
                                      "parallel_multiple", "live_simple", "live_parallel"])
def test_every_real_bfcl_answer_passes_itself(category):
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None:
        pytest.skip("bfcl-eval is not installed (pip install --no-deps bfcl-eval)")
    d = Path(list(spec.submodule_search_locations)[0]) / "data"
    items = load_bfcl(d / f"BFCL_v4_{category}.json",
                      d / f"possible_answer/BFCL_v4_{category}.json")
    failed = []
    for it in items:
        calls = [Call(n, a) for n, a in first_accepted(it.ground_truth, it.functions)]
        if not check(calls, it.ground_truth, it.functions).valid:
            failed.append(it.id)
        if not check(calls, it.ground_truth, bfcl_tools(it.functions)).valid \
                and it.id not in failed:
            failed.append(it.id + " (converted tools)")
    # BFCL's own data holds a few answers that contradict their docs (a required parameter
    # marked omittable, an element of the wrong type); measured: at most 2 per file here.
    known = {"parallel_multiple": {"parallel_multiple_94"},
             "live_simple": {"live_simple_106-63-0", "live_simple_112-68-0"}}
    assert set(failed) <= known.get(category, set()), failed
    assert len(items) >= 16
