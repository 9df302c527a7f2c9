"""The long_context canary: items at the long-context round's lengths, scored by verified
success, protected by decontamination without its filler notes blocking training tasks; the
round's default target."""
from __future__ import annotations

from data import tasks as taskgen
from data.verify import verify
from gates.canaries import builtin_suite
from gates.decontamination import decontaminator_for
from gates.gate import long_context_lengths, suites_for
from pipeline import config


def test_items_cycle_the_lengths_are_prefix_stable_and_their_oracles_verify():
    suite = builtin_suite("long_context", 6, context_tokens=[800, 1600])
    assert suite.scorer == "long_context" and suite.primary == "success"
    assert [t.faults["pad_chars"] for t in suite.items] == [133, 266] * 3  # budget // 6 chars
    assert all(t.kind == "long_context" for t in suite.items)
    assert [len(t.history) for t in suite.items] == [0, 2] * 3   # 1600: one earlier turn
    assert all(len(t.tools) > len({g.name for g in t.gold_calls}) + 2 for t in suite.items)
    for t in suite.items:
        v = verify(t, t.messages() + t.oracle, require_plan=True)
        assert v.success and v.score == 1.0, (t.id, v.reasons)
    small = builtin_suite("long_context", 4, context_tokens=[800, 1600])
    assert [t.id for t in small.items] == [t.id for t in suite.items[:4]]
    other = builtin_suite("long_context", 2, context_tokens=[600])
    assert {t.id for t in other.items}.isdisjoint(t.id for t in suite.items)


def test_the_canary_takes_the_long_context_rounds_lengths():
    cfg = config.load(preset="default", overrides=["canaries.sizes.long_context=4"])
    assert long_context_lengths(cfg) == [800, 1600]
    lc = next(s for s in suites_for(cfg) if s.name == "long_context")
    assert [t.faults["pad_chars"] for t in lc.items] == [133, 266, 133, 266]
    tiny = config.load(preset="tiny")
    assert tiny.rounds["long_context"].target == "long_context"     # the round's default
    assert tiny.canaries.size("long_context", tiny.rounds["long_context"]) == 2
    assert tiny.canaries.size("long_context", tiny.rounds["plan_finish"]) == 0


def test_decontamination_protects_its_prompts_not_its_filler_notes():
    cfg = config.load(preset="default", overrides=["canaries.sizes.long_context=100"])
    guard = decontaminator_for(suites_for(cfg, cfg.canaries.largest_sizes(cfg.rounds.values())),
                               bfcl=False)
    lc = next(s for s in suites_for(cfg) if s.name == "long_context")
    assert all(guard.hit(t.prompt) for t in lc.items)
    notes = hits = 0
    for length in (800, 1600):
        for i in range(40):
            t = taskgen.make("long_context", i, namespace="round-3-b0", context_tokens=length)
            for m in t.history:
                if m["role"] == "user":
                    notes += 1
                    hits += guard.hit(m["content"]) is not None
    assert notes == 40 and hits == 0
