"""Round 5's signal: frontier tasks chosen from a probe's pass rates, and GRPO groups whose
rewards are all equal taken out of the loss (share logged exactly). Fakes only: no model."""
from __future__ import annotations

import json
from collections import defaultdict
from contextlib import nullcontext
from types import SimpleNamespace

import pytest
import torch
from pydantic import ValidationError

from data.filters import Decontaminator
from data.tasks import generate
from pipeline.config import RunConfig
from rounds.rl_polish import RLSettings
from engine.runstore import RunStore
from engine.sampling.base import Completion
from engine.training.zero_variance import (SHARE_KEY, DropZeroVariance, constant_groups,
                                             drop_rows)
from rounds.common import RoundContext
from rounds.rl_polish import capped, frontier, pool_summary, select_frontier


# ------------------------------------------------------------------------------ frontier

def test_select_frontier_keeps_tasks_solved_sometimes_in_table_order():
    rates = {"a": (4, 4), "b": (1, 4), "c": (0, 4), "d": (3, 4), "e": (2, 4), "f": (0, 0)}
    assert select_frontier(rates, 2) == (["b", "d", "e"], 0)
    assert select_frontier(rates, 3) == (["b", "d", "e"], 0)


def test_select_frontier_fills_nearest_half_then_spread_then_harder():
    rates = {"solved": (4, 4), "none": (0, 4), "b": (1, 4), "unsolved": (0, 4),
             "spread": (4, 4)}
    # every non-frontier task is 0.5 away; the one whose probe scores differed comes first,
    # then the unsolved ones (lower rate) in table order, then the solved one
    assert select_frontier(rates, 3, {"spread": 0.4, "none": 0.0}) == (["b", "spread", "none"],
                                                                       2)
    assert select_frontier(rates, 5, {"spread": 0.4}) == (
        ["b", "spread", "none", "unsolved", "solved"], 4)
    # no spread known: the unsolved one before the solved one
    assert select_frontier({"x": (3, 3), "y": (0, 3)}, 1) == (["y"], 1)


def test_pool_summary_pass_at_1_and_k():
    rates = {"a": (4, 4), "b": (1, 4), "c": (0, 4), "d": (3, 4)}
    s = pool_summary(rates)
    assert s["pass@1"] == pytest.approx((1 + 0.25 + 0 + 0.75) / 4)  # 0.5
    assert s["pass@k"] == pytest.approx(3 / 4)
    assert s["difficulty"] == {"solved": 1, "frontier": 2, "unsolved": 1}
    assert pool_summary({**rates, "unprobed": (0, 0)})["pass@1"] == pytest.approx(0.5)


def test_frontier_settings_are_strict():
    assert RLSettings().frontier.enabled and RLSettings().frontier.probe_k is None
    with pytest.raises(ValidationError, match="probe_k"):
        RLSettings(frontier={"probe_k": 1})
    with pytest.raises(ValidationError, match="extra"):
        RLSettings(frontier={"candidates": 40})
    with pytest.raises(ValidationError, match="min_tasks=1 is below grpo.tasks_per_step=2"):
        RLSettings(frontier={"min_tasks": 1}, grpo={"tasks_per_step": 2})
    # no sampler keys of its own (the probe samples with GRPO's: see the frontier test below)
    s = RLSettings(grpo={"temperature": 0.7, "max_new_tokens": 64})
    assert not any(hasattr(s, k) for k in ("temperature", "top_p", "max_new_tokens", "k"))
    with pytest.raises(ValidationError, match="extra"):
        RLSettings(temperature=0.7)


class ScriptedBackend:
    """Answers each reasoning task right or wrong as `wins[task]` says, sample by sample (the
    driver asks for a task's samples in order)."""
    name = "scripted"

    def __init__(self, tasks, wins):
        self.by_prompt = {t.prompt: t for t in tasks}
        self.wins, self.asked = wins, defaultdict(int)
        self.params = []

    def generate(self, prompts, params, seeds, conversations=None):
        self.params.append(params)
        out = []
        for messages, _ in conversations:
            task = self.by_prompt[messages[1]["content"]]
            j = self.asked[task.id]
            self.asked[task.id] += 1
            text = task.oracle[0]["content"] if self.wins[task.id][j] else "The answer is -1."
            out.append(Completion(text, list(range(len(text.split()))), 10, "stop"))
        return out

    def close(self):
        pass


def test_frontier_probes_selects_fills_and_records(tmp_path):
    tasks = [capped(t, 2) for t in generate({"reasoning": 6})]
    assert [t.max_turns for t in tasks] == [2] * 6  # as GRPO plays them (grpo.max_turns)
    ids = [t.id for t in tasks]
    wins = dict(zip(ids, [[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0],
                          [0, 0, 0, 0], [1, 1, 1, 1]]))
    backend = ScriptedBackend(tasks, wins)
    settings = RLSettings(tasks={"reasoning": 6},
                          grpo={"group_size": 4, "tasks_per_step": 1, "temperature": 0.9,
                                "max_new_tokens": 48, "max_turns": 2},
                          frontier={"min_tasks": 4})
    ctx = RoundContext(cfg=RunConfig(), settings=settings, store=RunStore(tmp_path / "run"),
                       number=5, name="rl_polish", start_model=tmp_path / "base",
                       decontaminator=Decontaminator([]),
                       open_backend=lambda model_dir: nullcontext(backend), progress=False)
    chosen = frontier(ctx, tasks)
    # frontier: tasks 2 (1/4) and 3 (3/4); filled: the unsolved 1 and 4 (all tie at 0.5 off,
    # no probe score spread, lower rate first)
    assert [t.id for t in chosen] == [ids[2], ids[3], ids[1], ids[4]]
    assert backend.params[0].temperature == 0.9 and backend.params[0].max_tokens == 48
    assert backend.params[0].top_p == 1.0
    st = ctx.stats["frontier"]
    assert st["tasks"] == 6 and st["probe_k"] == 4 and st["min_tasks"] == 4
    assert st["pass@1"] == pytest.approx(0.5)          # (1 + 0 + .25 + .75 + 0 + 1) / 6
    assert st["pass@k"] == pytest.approx(4 / 6, abs=1e-4)
    assert st["difficulty"] == {"solved": 2, "frontier": 2, "unsolved": 2}
    assert st["used"] == 4 and st["filled"] == 2
    assert st["used_difficulty"] == {"solved": 0, "frontier": 2, "unsolved": 2}
    assert ctx.store.state()["rounds"]["5"]["done"]["frontier"]["used"] == 4
    table = json.loads((ctx.dir / "frontier.json").read_text())["tasks"]
    assert table[ids[2]] == {"successes": 1, "samples": 4, "difficulty": "frontier",
                             "used": True}
    assert table[ids[0]]["used"] is False
    assert ctx.step_done("probe")
    # resumed: the probe step is read back, not sampled again
    again = frontier(ctx, tasks)
    assert [t.id for t in again] == [t.id for t in chosen] and len(backend.params) == 1


# ------------------------------------------------------------------------------ zero variance

def test_constant_groups_finds_the_tied_group():
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.5,      # differ
                            0.3, 0.3, 0.3, 0.3,      # all equal: no advantage
                            0.0, 0.0, 0.0, 1.1])     # differ
    assert constant_groups(rewards, 4).tolist() == [False, True, False]
    # float noise counts as equal (as TRL's zero-std test); NaN (unscorable) is left out
    assert constant_groups(torch.tensor([0.1 + 0.2, 0.3, float("nan"), 0.3]), 4).tolist() == [True]
    with pytest.raises(ValueError, match="groups of 4"):
        constant_groups(torch.zeros(6), 4)


def test_drop_rows_zeroes_loss_mask_and_advantages_and_recounts_tokens():
    completion_mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]])
    tool_mask = torch.tensor([[1, 0, 1, 1], [1, 1, 1, 1], [1, 1, 0, 1], [1, 1, 1, 1]])
    batch = {"completion_mask": completion_mask, "tool_mask": tool_mask,
             "advantages": torch.tensor([0.5, -0.5, 1e-5, -1e-5]),
             "num_items_in_batch": torch.tensor(11)}
    drop_rows(batch, torch.tensor([True, True, False, False]))
    assert batch["tool_mask"].tolist() == [[1, 0, 1, 1], [1, 1, 1, 1], [0] * 4, [0] * 4]
    assert batch["advantages"].tolist() == [0.5, -0.5, 0.0, 0.0]
    assert batch["num_items_in_batch"].item() == 2 + 2  # loss tokens of the kept rows
    assert torch.equal(batch["completion_mask"], completion_mask)  # attention untouched


class FakeGRPO:
    """What DropZeroVariance needs of TRL's GRPOTrainer: a scored batch and its rewards."""

    def __init__(self, rewards_per_func, weights, group, process_index=0, n_local=None):
        self.rpf, self.reward_weights = rewards_per_func, torch.tensor(weights)
        self.num_generations = self.num_generations_eval = group
        self.model = SimpleNamespace(training=True)
        self.accelerator = SimpleNamespace(process_index=process_index,
                                           gather=lambda t: t * 2)  # two equal processes
        self._metrics = {"train": defaultdict(list)}
        self.n_local = n_local or rewards_per_func.shape[0]

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        return self.rpf

    def _generate_and_score_completions(self, inputs):
        self._calculate_rewards(inputs, None, None, None)
        n = self.n_local
        return {"completion_ids": torch.zeros(n, 3, dtype=torch.long),
                "completion_mask": torch.ones(n, 3, dtype=torch.long),
                "tool_mask": torch.ones(n, 3, dtype=torch.long),
                "advantages": torch.ones(n), "num_items_in_batch": torch.tensor(2 * n * 3)}


class Trainer(DropZeroVariance, FakeGRPO):
    pass


def rewards_table():
    # columns: verifier (w 1), format (w 0.1), tool_calls (w 0), unfinished (w 0); groups of 2.
    # group 0: totals 1.1 and 0.1 (differ); group 1: 0.05 and 0.05 although tool_calls differ
    # (weight 0: not a reward); group 2: 0.6 and 0.6; group 3: 1.0 and 1.1
    return torch.tensor([[1.0, 1.0, 2, 0], [0.0, 1.0, 0, 1],
                         [0.0, 0.5, 3, 1], [0.0, 0.5, 0, 1],
                         [0.5, 1.0, 1, 0], [0.5, 1.0, 1, 0],
                         [1.0, 0.0, 1, 0], [1.0, 1.0, 1, 0]])


def test_mixin_drops_tied_groups_and_logs_the_exact_share():
    t = Trainer(rewards_table(), [1.0, 0.1, 0.0, 0.0], group=2)
    batch = t._generate_and_score_completions([])
    assert t._metrics["train"][SHARE_KEY] == [0.5]  # 2 of 4 groups
    assert batch["tool_mask"].sum(dim=1).tolist() == [3, 3, 0, 0, 0, 0, 3, 3]
    assert batch["advantages"].tolist() == [1, 1, 0, 0, 0, 0, 1, 1]
    assert batch["num_items_in_batch"].item() == 2 * 12  # 4 kept rows x 3 tokens, 2 processes


def test_mixin_takes_its_process_slice_and_can_only_log():
    t = Trainer(rewards_table(), [1.0, 0.1, 0.0, 0.0], group=2, process_index=1, n_local=4)
    batch = t._generate_and_score_completions([])  # rows 4..7: groups 2 (tied) and 3
    assert batch["tool_mask"].sum(dim=1).tolist() == [0, 0, 3, 3]
    off = Trainer(rewards_table(), [1.0, 0.1, 0.0, 0.0], group=2)
    off.drop_zero_variance = False
    batch = off._generate_and_score_completions([])
    assert off._metrics["train"][SHARE_KEY] == [0.5]
    assert batch["tool_mask"].sum().item() == 24 and batch["num_items_in_batch"].item() == 48


# ------------------------------------------------------------------------------ RL curves

def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_grpo_panels_in_grpo_png_and_the_run_report(tmp_path):
    import base64

    from gates.html import training_curves
    from engine.training.curves import plot_curves
    from engine.training.panels import GRPO_PANELS
    keys = [k for k, _ in GRPO_PANELS]
    assert {"reward", "kl", "loss", "rewards/tool_calls/mean", "rewards/unfinished/mean",
            SHARE_KEY} == set(keys)
    d = tmp_path / "run" / "round-5-rl_polish"
    d.mkdir(parents=True)
    rows = [{"step": s, "reward": 0.1 * s, "kl": 0.01 * s, "loss": 0.02,
             "rewards/tool_calls/mean": 1.5, "rewards/unfinished/mean": 0.25,
             SHARE_KEY: 0.5} for s in (1, 2, 3)]
    (d / "grpo_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows)
                                      + json.dumps({"step": 3, "train_loss": 0.02}) + "\n")
    [(caption, png)] = training_curves(tmp_path / "run")
    assert caption == "round-5-rl_polish / grpo_log.jsonl"
    assert png_size(base64.b64decode(png)) == (1134, 540)  # 6 panels, 3 a row: 12.6 x 6 in
    out = plot_curves(d / "grpo_log.jsonl", d / "grpo.png", GRPO_PANELS, "GRPO")
    assert png_size(out.read_bytes()) == (1080, 576)  # 12 x 6.4 in at 90 dpi
    # an older log without the new keys: only its panels, in one row
    (d / "grpo_log.jsonl").write_text(json.dumps({"step": 1, "reward": 0.2, "kl": 0.0}) + "\n")
    [(_, png)] = training_curves(tmp_path / "run")
    assert png_size(base64.b64decode(png)) == (756, 270)
