"""Replay across rounds (`rounds.replay`): the count, the kind x domain mix, the seed, the
source rounds (promoted ones only) and decontamination of the replayed rows."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from data import jsonl
from data.filters import Decontaminator
from data.trajectory import Trajectory
from pipeline import config
from engine.runstore import RunStore
from rounds.common import RoundContext
from rounds.replay import allocate, match_mix, replay_count, replay_rows

CANARY = "What is the weather in the canary town of Zzyzx today, in degrees please?"


def row(i: int, kind: str, domain: str, rnd: int, prompt: str | None = None) -> Trajectory:
    prompt = prompt or f"request number {i} of round {rnd} about {kind} in {domain}"
    return Trajectory(id=f"r{rnd}-{i}", task_id=f"t{rnd}-{i}", domain=domain, kind=kind,
                      round=rnd, messages=[{"role": "user", "content": prompt},
                                           {"role": "assistant", "content": f"answer {i}"}],
                      tools=[])


def test_allocate_is_proportional_with_largest_remainders():
    sizes = {("single", "weather"): 6, ("chained", "currency"): 3, ("recovery", "flights"): 1}
    # exact shares 3, 1.5, 0.5: floors 3/1/0, the one left goes to the first tied group
    assert allocate(sizes, 5) == {("single", "weather"): 3, ("chained", "currency"): 2,
                                  ("recovery", "flights"): 0}
    assert allocate(sizes, 100) == sizes          # never more than a group holds
    assert allocate(sizes, 0) == dict.fromkeys(sizes, 0)


def test_match_mix_matches_the_pool_and_is_seeded():
    pool = ([(1, row(i, "single", "weather", 1)) for i in range(20)]
            + [(1, row(100 + i, "chained", "currency", 1)) for i in range(10)]
            + [(2, row(200 + i, "irrelevance", "synthetic", 2)) for i in range(10)])
    got = match_mix(pool, 8, seed=7)
    mix = Counter((t.kind, t.domain) for _, t in got)
    assert mix == {("single", "weather"): 4, ("chained", "currency"): 2,
                   ("irrelevance", "synthetic"): 2}
    assert [t.id for _, t in got] == [t.id for _, t in match_mix(list(reversed(pool)), 8, 7)]
    assert [t.id for _, t in got] != [t.id for _, t in match_mix(pool, 8, seed=8)]
    assert len(match_mix(pool, 1000, 0)) == 40


def test_replay_count_is_a_share_of_all_rows():
    assert replay_count(70, 0.3) == 30           # 30 of 100 training rows replayed
    assert replay_count(10, 0.5) == 10
    assert replay_count(10, 0.0) == 0


@pytest.fixture
def run_store(tmp_path):
    """A run where rounds 1 and 3 were promoted and round 2 rejected, each with an accepted
    set on disk; one round-1 row asks a canary's prompt."""
    store = RunStore(tmp_path / "run")
    r1 = ([row(i, "single", "weather", 1) for i in range(12)]
          + [row(20 + i, "chained", "currency", 1) for i in range(6)]
          + [row(99, "single", "weather", 1, prompt=CANARY)])
    r2 = [row(i, "parallel", "units", 2) for i in range(10)]
    r3 = [row(i, "long_context", "flights", 3) for i in range(6)]
    jsonl.write_atomic(store.round_dir(1, "grounding") / "accepted.jsonl", r1)
    jsonl.write_atomic(store.round_dir(2, "plan_finish") / "accepted.jsonl", r2)
    jsonl.write_atomic(store.round_dir(3, "long_context") / "accepted.jsonl", r3)
    store.promote({"round": 1, "name": "grounding", "model": "m1", "eval_dir": "e1"})
    store.promote({"round": 3, "name": "long_context", "model": "m3", "eval_dir": "e3"})
    return store


def context(store: RunStore, number: int, name: str, share: float) -> RoundContext:
    cfg = config.load(preset="tiny", overrides=[f"rounds.{name}.replay.share={share}"])
    return RoundContext(cfg=cfg, settings=cfg.rounds[name], store=store, number=number,
                        name=name, start_model=store.root, open_backend=None,
                        decontaminator=Decontaminator({"canary": [CANARY]}), progress=False)


def test_replay_rows_from_promoted_rounds_matched_and_decontaminated(run_store):
    ctx = context(run_store, 4, "self_improve", share=0.5)
    new = [row(i, "recovery", "calendar", 4) for i in range(12)]
    got = replay_rows(ctx, new)
    assert len(got) == 12                                    # share 0.5: as many as new
    assert all(t.messages[0]["content"] != CANARY for t in got)
    assert not any(t.kind == "parallel" for t in got)        # round 2 was not promoted
    # pool after decontamination: round 1 weather 12, currency 6; round 3 flights 6 (24)
    assert Counter(t.kind for t in got) == {"single": 6, "chained": 3, "long_context": 3}
    info = json.loads(run_store.state_path.read_text())["rounds"]["4"]["done"]["replay"]
    assert info["replayed"] == 12 and info["new"] == 12 and info["pool"] == 24
    assert info["decontaminated"] == 1 and info["from_rounds"] == [1, 3]
    assert info["by_round"] == {"1": {"chained": 3, "single": 6}, "3": {"long_context": 3}}
    assert info["new_by_kind"] == {"recovery": 12}
    on_disk = jsonl.read_all(ctx.dir / "replay.jsonl", Trajectory)
    assert [t.id for t in on_disk] == [t.id for t in got]
    assert [t.id for t in replay_rows(ctx, new)] == [t.id for t in got]  # step done: read back


def test_replay_sees_only_rounds_before_it_and_share_zero_turns_it_off(run_store):
    ctx = context(run_store, 2, "plan_finish", share=0.3)
    got = replay_rows(ctx, [row(i, "chained", "units", 2) for i in range(7)])
    assert len(got) == 3 and {t.round for t in got} == {1}   # 0.3 / 0.7 x 7 = 3
    off = context(run_store, 3, "long_context", share=0.0)
    assert replay_rows(off, [row(0, "long_context", "units", 3)]) == []
    info = run_store.state()["rounds"]["3"]["done"]["replay"]
    assert info["replayed"] == 0 and info["from_rounds"] == []


def test_status_and_report_show_new_and_replayed_rows():
    from gates.report import step_notes
    notes = dict(step_notes({"replay": {
        "share": 0.3, "new": 7, "replayed": 3, "pool": 18, "decontaminated": 1,
        "new_by_kind": {"chained": 7}, "by_round": {"1": {"chained": 1, "single": 2}}}}))
    assert notes["replay"] == ("7 new (chained 7) + 3 replayed: round 1 chained 1, single 2 "
                               "(share 0.30, pool 18, 1 dropped by decontamination)")
