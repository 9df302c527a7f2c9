"""Every built-in reasoning task states a sensible problem and its answer solves it: change is
never negative (a buyer pays at least the price), counts add up, the plan's arithmetic agrees."""
from __future__ import annotations

import re

import pytest

from data.tasks import make

CHANGE = re.compile(r"buys (\d+) \w+ at (\d+) dollars each and pays with (\d+) dollars")
BOXES = re.compile(r"A box holds (\d+) \w+\. \w+ has (\d+) full boxes and (\d+) loose")
PAGES = re.compile(r"reads (\d+) pages a day for (\d+) days, then (\d+) pages on the last day")


def _expected(prompt: str) -> int:
    """The answer the prompt asks for, worked out from its own numbers (and the problem is
    one a person could pose: a payment covers the price)."""
    if m := CHANGE.search(prompt):
        n, price, paid = map(int, m.groups())
        assert paid >= n * price, f"pays {paid} for {n} x {price}: {prompt}"
        return paid - n * price
    if m := BOXES.search(prompt):
        per_box, boxes, loose = map(int, m.groups())
        return per_box * boxes + loose
    if m := PAGES.search(prompt):
        per_day, days, last = map(int, m.groups())
        return per_day * days + last
    raise AssertionError(f"a reasoning prompt no template matches: {prompt}")


@pytest.mark.parametrize("split, namespace", [("train", "default"), ("canary", "canary-v2")])
def test_every_reasoning_answer_is_sensible_for_its_template(split, namespace):
    forms = set()
    for i in range(3000):
        task = make("reasoning", i, split=split, namespace=namespace)
        want = _expected(task.prompt)
        assert task.answer == want and want >= 0, (task.id, task.prompt, task.answer)
        forms.add(next(n for n, r in enumerate((CHANGE, BOXES, PAGES)) if r.search(task.prompt)))
        plan = task.oracle[-1]["content"] if task.oracle else ""
        assert str(want) in plan, (task.id, plan)
    assert forms == {0, 1, 2}


def test_canary_items_change_with_the_canary_version():
    """The fix changed what the generator makes, so the canary version moved on: gate reports
    of the old items are not compared with the new ones under one name."""
    from pipeline.config import CanarySettings, load
    assert CanarySettings().version == "v2"
    assert load(preset="tiny").canaries.version == "v2"
