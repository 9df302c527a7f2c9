"""BFCL categories as gate canaries: suites in the shape the gate's paired statistics read,
fixed per version, and every BFCL prompt protected by the decontamination filter."""
import importlib.util

import pytest

from data.chatformat import format_call
from engine.sampling.base import Completion

pytestmark = pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None,
                                reason="bfcl-eval is not installed (see .ci/setup)")

SIZES = {"multi_turn_base": 3, "simple_python": 4}


class Oracle:
    """A fake backend that knows the answers: gold calls for the canary items it was given
    (found by the conversation's first user message), then a plain answer."""
    name = "oracle"

    def __init__(self, singles, entries):
        from data.bfcl import parse_call_string
        from gates.ast_check import first_accepted
        self.single = {it.messages[-1]["content"]: first_accepted(it.ground_truth, it.functions)
                       for it in singles}
        self.multi = {e.turns[0][0]["content"]:
                      [[parse_call_string(s, e.all_functions()) for s in t]
                       for t in e.ground_truth] for e in entries}

    def generate(self, prompts, params, seeds, conversations=None):
        out = []
        for messages, _ in conversations:
            users = [m["content"] for m in messages if m["role"] == "user"]
            if messages[-1]["role"] == "tool":
                calls = []
            elif users[0] in self.multi:
                calls = self.multi[users[0]][len(users) - 1]
            else:
                calls = self.single.get(users[-1], [])
            text = "\n".join(format_call(n, a) for n, a in calls) or "Done."
            out.append(Completion(text, [0], 10, "stop"))
        return out

    def close(self):
        pass


class Silent(Oracle):
    def __init__(self):
        pass

    def generate(self, prompts, params, seeds, conversations=None):
        return [Completion("I cannot help.", [0], 10, "stop") for _ in prompts]


def test_bfcl_canaries_compare_like_any_canary():
    from gates.bfcl_canary import canary_items, evaluate_canaries
    from gates.stats import paired
    oracle = Oracle(canary_items("simple_python", 4), canary_items("multi_turn_base", 3))
    good = evaluate_canaries(oracle, SIZES, k=2)
    bad = evaluate_canaries(Silent(), SIZES, k=2)
    assert sorted(good) == ["bfcl_multi_turn_base", "bfcl_simple_python"]
    for name, suite in good.items():
        base = bad[name]
        assert suite["hash"] == base["hash"] and suite["n_items"] == SIZES[name[5:]]
        assert suite["primary"] == "accuracy" and set(suite["items"]) == set(base["items"])
        assert suite["metrics"] == {"accuracy": 1.0, "pass@k": 1.0}
        assert base["metrics"]["accuracy"] == 0.0
        p = paired({i: v["accuracy"] for i, v in suite["items"].items()},
                   {i: v["accuracy"] for i, v in base["items"].items()})
        assert p.delta == 1.0 and p.wins == p.n
    # a new suite version draws other items, hence another hash
    assert canary_items("simple_python", 4, "v2") != canary_items("simple_python", 4)


def test_every_bfcl_prompt_is_protected():
    from data.bfcl import load_multi_turn, load_single
    from data.filters import Decontaminator
    from gates.bfcl_canary import protected_prompts
    prompts = protected_prompts(("simple_python", "multi_turn_base"))
    guard = Decontaminator(prompts)
    item = load_single("simple_python")[123]
    entry = load_multi_turn("multi_turn_base")[77]
    assert guard.reason(item.messages[-1]["content"])
    assert guard.reason(entry.turns[-1][0]["content"])
    assert guard.reason("Move my weekly report into the archive folder, please.") is None
