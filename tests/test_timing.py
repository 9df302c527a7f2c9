"""Where a run's time goes: the step timer (exclusive nested times, resume), the engine keeper
(one engine kept per model, closed on a model change, counted and timed), and one real tiny
round's recorded breakdown as `pipeline status`, `pipeline bench run` and report.html show it."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from engine import sampling, timing
from engine.sampling import backend_opener, keep_engines, release_engine


class FakeClock:
    """perf_counter that moves only when told to."""

    def __init__(self):
        self.now = 100.0

    def perf_counter(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = FakeClock()
    monkeypatch.setattr(timing, "time", c)
    return c


def test_nested_steps_are_exclusive_and_counted(clock):
    saved = []
    timer = timing.StepTimer(on_change=saved.append)
    with timer.running():
        with timing.section("sampling"):
            clock.now += 2.0
            with timing.section("engine_start", model="m"):
                clock.now += 5.0
            clock.now += 1.0
        with timing.section("sampling"):
            clock.now += 0.5
        timing.count("engine_reuse")
        timing.add_tokens("sampling", 300, 3.5)
    with timing.section("training"):  # no timer running: not recorded
        clock.now += 9.0
    d = timer.to_dict()
    assert d["steps"] == {"engine_start": 5.0, "sampling": 3.5}   # 2 + 1 + 0.5, start taken out
    assert d["counts"] == {"engine_start": 1, "sampling": 2, "engine_reuse": 1}
    assert d["events"] == [{"step": "engine_start", "seconds": 5.0, "model": "m"}]
    assert d["throughput"]["sampling"] == {"tokens": 300, "seconds": 3.5, "tokens_per_s": 85.7}
    assert saved[-1] == d  # saved after every change


def test_a_resumed_timer_keeps_what_was_recorded(clock):
    recorded = {"steps": {"tasks": 1.0, "training": 40.0}, "counts": {"training": 1},
                "throughput": {"training": {"tokens": 4000, "seconds": 40.0}}}
    timer = timing.StepTimer.load(recorded)
    with timer.running(), timing.section("gate_candidate"):
        clock.now += 3.0
    timer.add_tokens("training", 1000, 10.0)
    d = timer.to_dict()
    assert d["steps"] == {"tasks": 1.0, "training": 40.0, "gate_candidate": 3.0}
    assert d["throughput"]["training"]["tokens_per_s"] == 100.0  # 5000 / 50


def test_breakdown_orders_steps_and_adds_the_unattributed_rest():
    rec = {"steps": {"training": 30.0, "tasks": 1.0, "my_step": 2.0, "engine_start": 7.0}}
    assert timing.breakdown(rec, wall_s=50.0) == [
        ("tasks", 1.0), ("engine_start", 7.0), ("training", 30.0), ("other", 10.0),
        ("my_step", 2.0)]
    rows = timing.shares(timing.breakdown(rec))
    assert rows[2] == ("training", 30.0, 75.0)  # 30 of 40
    both = timing.combine([rec, {"steps": {"training": 10.0}, "counts": {"engine_start": 2}}])
    assert both["steps"]["training"] == 40.0 and timing.engine_starts(both) == (2, 7.0, 0)


class FakeBackend:
    """A backend that records its life."""
    log: list[str] = []

    def __init__(self, model, **opts):
        self.model = str(model)
        FakeBackend.log.append(f"start {self.model}")

    def close(self):
        FakeBackend.log.append(f"close {self.model}")


@pytest.fixture
def fake(monkeypatch):
    FakeBackend.log = []
    monkeypatch.setitem(sampling.BACKENDS, "fake", FakeBackend)
    return SimpleNamespace(backend="fake", options={"kv": 1})


def test_opener_reuses_the_same_model_and_closes_on_a_change(fake, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    opener = backend_opener(fake)
    timer = timing.StepTimer()
    with timer.running(), keep_engines() as slot:
        with opener(a) as first:
            pass
        with backend_opener(fake)(a) as again:  # another opener (the gate's) shares the slot
            assert again is first
        assert FakeBackend.log == [f"start {a}"]
        with opener(b):
            pass
        assert FakeBackend.log == [f"start {a}", f"close {a}", f"start {b}"]
        release_engine()  # before training
        with opener(b):
            pass
    assert FakeBackend.log == [f"start {a}", f"close {a}", f"start {b}", f"close {b}",
                               f"start {b}", f"close {b}"]  # the scope closes the last one
    assert [s["model"] for s in slot.starts] == [f"{tmp_path.name}/{m}" for m in "abb"]
    assert slot.reuses == 1
    assert timer.counts["engine_start"] == 3 and timer.counts["engine_reuse"] == 1
    assert timer.counts["engine_stop"] == 3  # on the change, before training, at the end
    assert [e["model"].split("/")[-1] for e in timer.events] == ["a", "b", "b"]


def test_opener_outside_a_scope_and_after_an_error_closes(fake, tmp_path):
    with backend_opener(fake)(tmp_path / "a"):
        pass
    assert FakeBackend.log == [f"start {tmp_path / 'a'}", f"close {tmp_path / 'a'}"]
    FakeBackend.log = []
    with keep_engines():
        with pytest.raises(RuntimeError):
            with backend_opener(fake)(tmp_path / "a"):
                raise RuntimeError("engine died")
        assert FakeBackend.log == [f"start {tmp_path / 'a'}", f"close {tmp_path / 'a'}"]
        with backend_opener(fake)(tmp_path / "a"):  # a fresh one, not the broken one
            pass
    assert FakeBackend.log[2:] == [f"start {tmp_path / 'a'}", f"close {tmp_path / 'a'}"]


def test_options_are_part_of_the_key(fake, tmp_path):
    other = SimpleNamespace(backend="fake", options={"kv": 2})
    with keep_engines() as slot:
        with backend_opener(fake)(tmp_path / "a"):
            pass
        with backend_opener(other)(tmp_path / "a"):
            pass
    assert len(slot.starts) == 2 and slot.reuses == 0


@pytest.fixture(scope="module")
def tiny_round(tmp_path_factory):
    """Round 1 of the tiny preset on a tiny random model (no export), run in this process."""
    from pipeline import config
    from pipeline.loop import run
    run_dir = tmp_path_factory.mktemp("timed") / "run"
    cfg = config.load(None, "tiny", [
        f"run_dir={run_dir}", "model=tiny:64", "export.enabled=false",
        "canaries.sizes={reasoning: 1, recovery: 1, single_turn: 1, multi_turn: 1, "
        "irrelevance: 1}", "rounds.grounding.tasks={single: 2, chained: 1}",
        "rounds.grounding.sft={max_steps: 1, batch_size: 2, max_length: 1024}"])
    assert run(cfg, only_round=1, progress=False) == {"grounding": "promoted"}
    return run_dir


def test_a_round_records_its_time_breakdown(tiny_round):
    r = json.loads((tiny_round / "state.json").read_text())["rounds"]["1"]
    t = r["timing"]
    for step in ("tasks", "engine_start", "engine_stop", "sampling", "filtering", "training",
                 "merge", "gate_baseline", "gate_candidate"):
        assert t["steps"][step] >= 0.0, step
    assert "export" not in t["steps"]  # export is off
    assert t["steps"]["training"] > 0.5 and t["steps"]["engine_start"] > 0.0
    # the baseline evaluation starts the base model's engine; sampling reuses it; training
    # closes it; the candidate's evaluation starts a second one
    assert t["counts"]["engine_start"] == 2 and t["counts"]["engine_reuse"] == 1
    assert t["counts"]["engine_stop"] == 1  # before training; the last one at the run's end
    assert [e["model"] for e in t["events"]][1] == "round-1-grounding/model"
    s = t["throughput"]["sampling"]
    done = r["done"]["rollouts"]
    assert s["tokens"] == done["generated_tokens"] > 0 and s["tokens_per_s"] > 0
    tr, train = t["throughput"]["training"], r["done"]["train"]
    assert tr["tokens"] == train["tokens_seen"] and tr["seconds"] == train["train_seconds"]
    assert sum(t["steps"].values()) <= r["wall_s"] + 0.1


def test_status_bench_and_report_show_the_breakdown(tiny_round, capsys):
    from gates.html import write_run_report
    from pipeline.bench.run import main as bench_run
    from pipeline.status import status_text
    t = json.loads((tiny_round / "state.json").read_text())["rounds"]["1"]["timing"]
    text = status_text(tiny_round)
    assert f" training {t['steps']['training']:.1f}s " in text
    assert "engines: 2 started" in text and "1 reused" in text
    assert "sampling " in text and " tok/s" in text

    assert bench_run([str(tiny_round)]) == 0
    out = capsys.readouterr().out
    assert "engine starts: 2" in out and "reused 1 times" in out
    row = next(line for line in out.splitlines() if line.startswith("training"))
    assert f"{t['steps']['training']:.1f}" in row and row.endswith("%")
    assert "total" in out and "sampling:" in out

    page = write_run_report(tiny_round).read_text()
    assert "Where the time went" in page and "<svg" in page
    assert f"training: {t['steps']['training']:.1f} s" in page
