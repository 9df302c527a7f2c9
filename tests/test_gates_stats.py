"""Paired statistics against a hand computation."""
import math

import pytest

from gates.stats import paired


def test_paired_se_matches_hand_computation():
    base = {"a": 0.0, "b": 0.5, "c": 1.0, "d": 0.25, "e": 0.0}
    cand = {"a": 1.0, "b": 0.5, "c": 0.5, "d": 0.75, "e": 1.0}
    # d = cand - base = [1.0, 0.0, -0.5, 0.5, 1.0]           (ids sorted a..e)
    # mean = 2.0 / 5 = 0.4
    # squared deviations: 0.36, 0.16, 0.81, 0.01, 0.36  -> sum 1.70
    # sample variance (n-1 = 4): 1.70 / 4 = 0.425
    # SE = sqrt(0.425 / 5) = sqrt(0.085) = 0.291547...
    p = paired(cand, base)
    assert p.n == 5
    assert p.delta == pytest.approx(0.4)
    assert p.se == pytest.approx(math.sqrt(0.085))
    assert p.se == pytest.approx(0.2915476, abs=1e-7)
    assert (p.wins, p.losses, p.ties) == (3, 1, 1)
    assert p.baseline == pytest.approx(1.75 / 5)
    assert p.candidate == pytest.approx(3.75 / 5)
    assert p.note == ""


def test_single_item_has_zero_se_and_says_so():
    p = paired({"x": 1.0}, {"x": 0.0})
    assert (p.n, p.delta, p.se, p.wins) == (1, 1.0, 0.0, 1)
    assert "n < 2" in p.note


def test_identical_models_tie_everywhere():
    v = {str(i): i / 10 for i in range(10)}
    p = paired(v, dict(v))
    assert (p.delta, p.se, p.wins, p.losses, p.ties) == (0.0, 0.0, 0, 0, 10)


def test_mismatched_items_are_refused():
    with pytest.raises(ValueError, match="same items"):
        paired({"a": 1.0, "b": 0.0}, {"a": 1.0, "c": 0.0})
