"""Pass-rate-aware pools (rounds.pool): pass rates and difficulties of hand-made trajectories,
exact allocations for given pass-rate vectors, the settings' checks, and rounds 2-4 run end to
end on a scripted fake backend (no model, no engine: training is replaced by a recorder), with
their pool numbers worked out by hand. Round 3's context-length fit uses the real tokenizer."""
from __future__ import annotations

import json
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest
from pydantic import ValidationError

from data.chatformat import IM_END, render
from data.envs.base import stable_int
from data.filters import Decontaminator
from data.trajectory import Trajectory, Verification
from pipeline.config import RunConfig
from rounds.long_context import LongContextSettings
from rounds.plan_finish import PlanFinishSettings
from rounds.self_improve import SelfImproveSettings
from engine.runstore import RunStore
from engine.sampling.base import CALL_STOP, Completion
from rounds import long_context, plan_finish, self_improve
from rounds.common import RoundContext
from rounds.pool import allocate, difficulty, pass_rates


# ---------------------------------------------------------------------------- pure pieces

def traj(task: str, ok: bool, sample: int = 0, source: str = "policy") -> Trajectory:
    return Trajectory(id=f"{task}#{source}{sample}", task_id=task, domain="d", kind="single",
                      sample=sample, source=source, messages=[], tools=[],
                      verification=Verification(success=ok, score=float(ok),
                                                      reasons=[] if ok else ["wrong"]))


def test_pass_rates_count_policy_samples_only():
    rows = [traj("a", True, 0), traj("a", False, 1), traj("a", True, 2),
            traj("b", False, 0), traj("b", False, 1),
            traj("c", True, 0),
            traj("b", True, 0, source="oracle"), traj("d", True, 0, source="teacher")]
    assert pass_rates(rows) == {"a": (2, 3), "b": (0, 2), "c": (1, 1)}


@pytest.mark.parametrize("wins,n,want", [(4, 4, "solved"), (1, 1, "solved"), (3, 4, "frontier"),
                                         (1, 8, "frontier"), (0, 4, "unsolved"),
                                         (0, 0, "unsolved")])
def test_difficulty(wins, n, want):
    assert difficulty(wins, n) == want


RATES = {"a": (4, 4), "b": (1, 4), "c": (3, 4), "d": (0, 4), "e": (2, 4)}


def test_allocation_without_budget_fills_every_unsolved_or_frontier_task_to_k_max():
    assert allocate(RATES, k_max=8) == {"a": 0, "b": 4, "c": 4, "d": 4, "e": 4}


def test_allocation_follows_fail_rates_within_the_budget():
    # 20 probe samples, 10 left; weights b 3/4, c 1/4, d 1/2 (unsolved_weight), e 2/4 (sum 2):
    # shares 3.75, 1.25, 2.5, 2.5 -> floors 3, 1, 2, 2 and the 2 left to the largest
    # remainders (b .75, then d .5 before e .5 by order)
    assert allocate(RATES, k_max=8, budget=30) == {"a": 0, "b": 4, "c": 1, "d": 3, "e": 2}


def test_allocation_caps_at_k_max_and_hands_the_rest_on():
    # 7 left, room 2 each; weights b .75 c .25 d 1 e .5 (sum 2.5): b 2.1 and d 2.8 hit the cap
    # (2 each, 3 left); then c .25 e .5: e 2 hits the cap, c gets the last 1
    assert allocate(RATES, k_max=6, budget=27, unsolved_weight=1.0) == \
        {"a": 0, "b": 2, "c": 1, "d": 2, "e": 2}


def test_allocation_spends_nothing_past_the_probe_or_on_hopeless_tasks():
    assert allocate(RATES, k_max=8, budget=20) == dict.fromkeys(RATES, 0)
    assert allocate(RATES, k_max=8, budget=12) == dict.fromkeys(RATES, 0)
    assert allocate(RATES, k_max=4) == dict.fromkeys(RATES, 0)       # the probe used k_max
    assert allocate(RATES, k_max=6, unsolved_weight=0.0)["d"] == 0


# ---------------------------------------------------------------------------- settings

def test_pool_is_off_unless_configured_and_checked_when_set():
    assert PlanFinishSettings(tasks={"single": 2}).pool is None
    s = SelfImproveSettings(tasks={"chained": 3}, pool={})
    assert (s.pool.k_probe, s.pool.k_max, s.pool.budget, s.pool.train_on) == (2, 4, None,
                                                                               ["frontier"])
    cfg = RunConfig.model_validate({"rounds": {"long_context": {
        "tasks": {"long_context": 2}, "pool": {"k_probe": 3, "k_max": 6, "budget": 9}}}})
    assert cfg.rounds["long_context"].pool.budget == 9
    bad = [({"k": 4, "pool": {}}, "k and pool are both set"),
           ({"pool": {"train_on": ["unsolved"]}}, "set oracle: true"),
           ({"pool": {"budget": 5}}, "below the probe alone (2 samples x 3 tasks = 6)"),
           ({"pool": {"k_probe": 4, "k_max": 3}}, "k_max (3) is below k_probe (4)"),
           ({"pool": {"train_on": ["easy"]}}, "train_on"),
           ({"pool": {"kprobe": 2}}, "kprobe")]
    for extra, words in bad:
        with pytest.raises(ValidationError, match=words.replace("(", r"\(").replace(")", r"\)")):
            PlanFinishSettings(tasks={"single": 2, "chained": 1}, **extra)
    PlanFinishSettings(tasks={"single": 2}, oracle=True, pool={"train_on": ["unsolved"]})


# ---------------------------------------------------------------------------- rounds

class Scripted:
    """Fake backend: a trajectory whose (task, sample) `solves` says yes replays its task's
    oracle through the real stop semantics; the others answer wrongly at once. The sample is
    told by the seed of its first request (`engine.rollout`: from round, task and sample)."""
    name = "scripted"

    def __init__(self, tasks, round_no: int, solves, asked: list):
        self.full = [render(t.messages() + t.oracle, t.tools) for t in tasks]
        self.first = {stable_int(stable_int(round_no, t.id, s), 0, 0, mod=2**31 - 1): (t.id, s)
                      for t in tasks for s in range(16)}
        self.solves, self.asked = solves, asked   # (task id, sample) of each first request

    def generate(self, prompts, params, seeds, conversations=None):
        out = []
        for p, seed in zip(prompts, seeds):
            if seed in self.first:
                self.asked.append(self.first[seed])
                if not self.solves(*self.first[seed]):
                    out.append(Completion("I cannot tell.", [1, 2, 3], 0, "stop"))
                    continue
            rest = next(f for f in self.full if f.startswith(p))[len(p):]
            i_call, i_end = rest.find(CALL_STOP), rest.find(IM_END)
            if i_call != -1 and i_call < i_end:
                text = rest[:i_call + len(CALL_STOP)]
                out.append(Completion(text, [1] * len(text), 0, "stop", CALL_STOP))
            else:
                out.append(Completion(rest[:i_end], [1] * (i_end + 1), 0, "stop"))
        return out

    def close(self):
        pass


class Rig:
    """A round context on the scripted backend; training recorded, not run."""

    def __init__(self, tmp: Path, module, settings, number: int, solves, start: Path | None = None):
        self.module, self.solves, self.opened, self.trained, self.asked = module, solves, [], \
            [], []
        self.backend = None
        self.ctx = RoundContext(cfg=RunConfig(), settings=settings, store=RunStore(tmp / "run"),
                                number=number, name=module.__name__.split(".")[-1],
                                start_model=start or tmp / "base",
                                decontaminator=Decontaminator([]), open_backend=self.open,
                                progress=False)

    @contextmanager
    def open(self, model_dir):
        self.opened.append(Path(model_dir))
        yield self.backend

    def run(self, monkeypatch, tasks_of):
        def train(ctx, accepted, base, step="train", out_dir=None):
            self.trained.append((step, Path(base), len(accepted)))
            return (out_dir or ctx.dir) / "model"
        monkeypatch.setattr(self.module, "train", train)
        original = self.module.make_tasks

        def make_tasks(ctx, *a, **kw):  # the scripted backend learns each iteration's tasks
            tasks = original(ctx, *a, **kw)
            order = {t.id: i for i, t in enumerate(tasks)}
            self.backend = Scripted(tasks, ctx.number,
                                    lambda tid, s: self.solves(order[tid], s), self.asked)
            tasks_of.append(tasks)
            return tasks
        monkeypatch.setattr(self.module, "make_tasks", make_tasks)
        return self.module.run(self.ctx)


def script(index: int, sample: int) -> bool:
    """Task 0 always solved; 1 on even samples; 2 from sample 2 on (unsolved in a probe of 2);
    3 never."""
    return {0: True, 1: sample % 2 == 0, 2: sample >= 2, 3: False}[index]


def test_plan_finish_pool_samples_by_pass_rate_and_trains_on_the_frontier(tmp_path, monkeypatch):
    settings = PlanFinishSettings(tasks={"single": 2, "chained": 2}, max_new_tokens=512,
                                  pool={"k_probe": 2, "k_max": 4, "budget": 12})
    rig, tasks = Rig(tmp_path, plan_finish, settings, 2, script), []
    cand = rig.run(monkeypatch, tasks)
    ids = [t.id for t in tasks[0]]
    # probe: 0 (2/2) solved, 1 (1/2) frontier, 2 and 3 (0/2) unsolved; 4 samples left, weights
    # 1/2 each (fail rate; unsolved_weight 0.5): shares 4/3 -> 1, 1, 1 and the last to task 1
    assert sorted(rig.asked) == sorted([(i, s) for i in ids for s in (0, 1)]
                                       + [(ids[1], 2), (ids[1], 3), (ids[2], 2), (ids[3], 2)])
    assert len(rig.opened) == 3                       # probe, top-up of 1, top-up of 2
    st = cand.stats["pool"]["pool"]
    # after: 0 2/2 solved, 1 2/4 and 2 1/3 frontier, 3 0/3 unsolved
    assert st["pass@1"] == round((1 + 0.5 + 1 / 3 + 0) / 4, 4) == 0.4583
    assert st["pass@k"] == 0.75 and st["probe_pass@1"] == 0.375 and st["probe_pass@k"] == 0.5
    assert (st["samples"], st["probe_samples"], st["topup_samples"], st["token_limit"]) == \
        (12, 8, 4, 0)
    assert st["probe_difficulty"] == {"solved": 1, "frontier": 1, "unsolved": 2}
    assert st["difficulty"] == {"solved": 1, "frontier": 2, "unsolved": 1}
    # the frontier's successes (identical replays: one per task after dedup), nothing else
    assert st["kept"] == {"solved": 0, "frontier": 2, "unsolved": 0}
    assert rig.trained == [("train", tmp_path / "base", 2)]
    state = json.loads((tmp_path / "run" / "state.json").read_text())["rounds"]["2"]["done"]
    assert {"pool-probe", "pool-topup1", "pool-topup2", "pool", "accepted"} <= set(state)
    assert state["pool"]["pass@k"] == 0.75 and state["pool-topup2"]["rollouts"] == 2

    # a rerun resumes every step from disk: no sampling, the same numbers
    again = Rig(tmp_path, plan_finish, settings, 2, script)
    assert again.run(monkeypatch, []).stats["pool"]["pool"] == st
    assert again.opened == [] and again.asked == []


def test_unsolved_tasks_train_on_their_oracle_rows_when_asked(tmp_path, monkeypatch):
    settings = PlanFinishSettings(tasks={"single": 2, "chained": 2}, max_new_tokens=512,
                                  oracle=True, pool={"train_on": ["frontier", "unsolved"]})
    rig = Rig(tmp_path, plan_finish, settings, 2, script)
    st = rig.run(monkeypatch, []).stats["pool"]["pool"]
    # no budget: 1, 2 and 3 filled to 4 samples; 2 turns frontier (2/4), 3 stays unsolved
    assert (st["samples"], st["difficulty"]) == (14, {"solved": 1, "frontier": 2,
                                                      "unsolved": 1})
    # task 3's oracle row (and no oracle row for the other tasks)
    assert st["kept"] == {"solved": 0, "frontier": 2, "unsolved": 1}


def test_always_train_keeps_the_solved_no_call_rows(tmp_path, monkeypatch):
    """mismatch tasks are verified as irrelevance: with always_train [irrelevance] the one
    every sample solves trains too (a replay of no-call rows beside the frontier's calls)."""
    def kept(always, sub):
        settings = PlanFinishSettings(tasks={"mismatch": 2, "single": 2}, max_new_tokens=512,
                                      pool={"k_probe": 2, "k_max": 4, "always_train": always})
        rig = Rig(tmp_path / sub, plan_finish, settings, 2, script)
        st = rig.run(monkeypatch, []).stats["pool"]["pool"]
        assert st["difficulty"] == {"solved": 2, "frontier": 1, "unsolved": 1}
        return st["kept"], rig.trained[0][2]
    # the fake's wrong answer calls nothing, so both mismatch tasks are solved; 2 (single) is
    # frontier, 3 (single) unsolved. Plain: the frontier's one row. Replay: + the mismatch
    # rows (task 0: two identical replays, one kept; task 1: the oracle and "I cannot tell.")
    assert kept([], "plain") == ({"solved": 0, "frontier": 1, "unsolved": 0}, 1)
    assert kept(["irrelevance"], "replay") == ({"solved": 3, "frontier": 1, "unsolved": 0}, 4)
    with pytest.raises(ValueError, match="always_train"):
        PlanFinishSettings(pool={"always_train": ["mismatch"]})   # a task kind as verified


def test_self_improve_iterations_sample_the_model_the_last_one_trained(tmp_path, monkeypatch):
    settings = SelfImproveSettings(tasks={"single": 2, "chained": 2}, max_new_tokens=512,
                                   iterations=2, pool={"k_probe": 2, "k_max": 3})
    rig, tasks = Rig(tmp_path, self_improve, settings, 4, script), []
    cand = rig.run(monkeypatch, tasks)
    it1 = rig.ctx.dir / "iter-1" / "model"
    assert cand.model_dir == rig.ctx.dir / "iter-2" / "model"
    # each iteration: a probe and one top-up of 1 (tasks 1-3); the second from iteration 1's model
    assert rig.opened == [tmp_path / "base"] * 2 + [it1] * 2
    assert [(s, b) for s, b, _ in rig.trained] == [("train-1", tmp_path / "base"),
                                                    ("train-2", it1)]
    assert {t.id for t in tasks[0]}.isdisjoint(t.id for t in tasks[1])   # new tasks each time
    pools = cand.stats["pool"]
    assert set(pools) == {"pool-1", "pool-2"}
    for st in pools.values():   # 0 2/2 solved; 1 2/3 and 2 1/3 frontier; 3 0/3
        assert st["difficulty"] == {"solved": 1, "frontier": 2, "unsolved": 1}
        assert (st["samples"], st["pass@k"]) == (11, 0.75)


def test_without_a_pool_rounds_sample_k_per_task_as_before(tmp_path, monkeypatch):
    settings = PlanFinishSettings(tasks={"single": 2, "chained": 2}, max_new_tokens=512, k=2,
                                  oracle=True)
    rig = Rig(tmp_path, plan_finish, settings, 2, script)
    cand = rig.run(monkeypatch, [])
    assert "pool" not in cand.stats and len(rig.asked) == 8
    assert cand.stats["steps"]["rollouts"]["successes"] == 3
    assert rig.trained == [("train", tmp_path / "base", 4)]   # one row per task (dedup)


# ---------------------------------------------------------------------------- round 3

@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """A model directory as far as round 3's fit reads it: the real tokenizer, a config."""
    from engine.models import smollm2_tokenizer_dir
    out = tmp_path_factory.mktemp("model")
    for f in smollm2_tokenizer_dir().iterdir():
        shutil.copy(f, out / f.name)
    (out / "config.json").write_text(json.dumps({"max_position_embeddings": 8192}))
    return out


def test_long_context_uses_the_lengths_that_fit_and_says_why_not(model_dir):
    from engine.models import load_tokenizer
    tok = load_tokenizer(model_dir)
    count = lambda text: len(tok.encode(text, add_special_tokens=False))  # noqa: E731
    r = long_context.fit([600, 1600, 12000], count, 4096, 8192, 128)
    n = r["needs"]
    assert 600 < n["600"] < n["1600"] < 4096 < n["12000"]
    assert r["used"] == [600, 1600] and list(r["refused"]) == ["12000"]
    assert "sampler.max_context_tokens (4096)" in r["refused"]["12000"]
    small = long_context.fit([600, 1600], count, 4096, n["600"], 128)
    assert small["used"] == [600] and "the model's window" in small["refused"]["1600"]
    assert long_context.model_window(model_dir) == 8192
    short = long_context.fit([600, 1600], count, 4096, 8192, 128, train_length=n["600"])
    assert short["used"] == [600]
    assert short["refused"]["1600"] == (f"its rows take {n['1600'] - 128} tokens, over "
                                        f"sft.max_length ({n['600']}): training would drop them")


def test_long_context_round_refuses_before_sampling_when_nothing_fits(tmp_path, model_dir,
                                                                      monkeypatch):
    settings = LongContextSettings(tasks={"long_context": 4}, context_tokens=[600, 12000],
                                   max_new_tokens=512, pool={})
    rig, tasks = Rig(tmp_path, long_context, settings, 3, script, start=model_dir), []
    rig.run(monkeypatch, tasks)
    ctx = rig.ctx.stats["context"]
    assert ctx["used"] == [600] and list(ctx["refused"]) == ["12000"]
    assert len(tasks[0]) == 4 and all(t.kind == "long_context" for t in tasks[0])
    # long_context tasks are single or chained underneath; the script's four difficulties
    assert rig.ctx.stats["pool"]["pool"]["difficulty"] == {"solved": 1, "frontier": 2,
                                                           "unsolved": 1}

    none = LongContextSettings(tasks={"long_context": 2}, context_tokens=[12000])
    rig = Rig(tmp_path / "b", long_context, none, 3, script, start=model_dir)
    with pytest.raises(ValueError, match="no context_tokens length fits: 12000: needs"):
        rig.run(monkeypatch, [])
    assert rig.opened == []


def test_run_summary_states_each_pool_and_the_context_fit(tmp_path, monkeypatch):
    from gates.report import summary_table
    settings = PlanFinishSettings(tasks={"single": 2, "chained": 2}, max_new_tokens=512,
                                  pool={"k_probe": 2, "k_max": 4, "budget": 12})
    rig = Rig(tmp_path, plan_finish, settings, 2, script)
    rig.run(monkeypatch, [])
    rig.ctx.store.mark(3, "context", {"limit": 4096, "needs": {"800": 1237, "12000": 4550},
                                      "used": [800], "refused": {"12000": "needs 4550 tokens"}})
    lines = summary_table(tmp_path / "run").splitlines()
    assert "round 2 pool: pass@1 0.458 pass@k 0.750 (probe 0.375/0.500), 4 tasks, 12 samples; " \
           "tasks solved/frontier/unsolved 1/2/1; kept 0/2/0 (train on frontier)" in lines
    assert "round 3 context: lengths used 800 (1237 tok); refused 12000: needs 4550 tokens; " \
           "limit 4096 tokens" in lines


@pytest.mark.slow
def test_tiny_round_two_with_a_pool(tmp_path):
    """The real loop on the tiny preset's round 2 with a pool (a tiny model, a real sampler
    and SFT): heavy, run with -m slow on an idle machine. A random model solves nothing, so
    every task is unsolved and trains on its oracle row."""
    from pipeline import config
    from pipeline.loop import run
    cfg = config.load(preset="tiny", overrides=[
        f"run_dir={tmp_path / 'run'}", "export.enabled=false",
        "rounds.plan_finish.pool={k_probe: 2, k_max: 3, train_on: [frontier, unsolved]}"])
    run(cfg, only_round=2, progress=False)
    state = json.loads((tmp_path / "run" / "state.json").read_text())["rounds"]["2"]
    pool = state["done"]["pool"]
    tasks = sum(cfg.rounds["plan_finish"].tasks.values())
    assert pool["tasks"] == tasks and pool["probe_samples"] == 2 * tasks
    assert pool["samples"] == pool["probe_samples"] + pool["topup_samples"] <= 3 * tasks
    assert sum(pool["difficulty"].values()) == tasks
    assert pool["kept"]["unsolved"] == pool["difficulty"]["unsolved"]   # one oracle row each
    assert state["done"]["accepted"]["accepted"] == sum(pool["kept"].values())
    assert "train" in state["done"]
