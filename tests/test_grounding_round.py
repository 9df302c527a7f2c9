"""Round 1 without the start model's samples (`sample_start: false`): the oracle rows alone
train, and no engine is opened. The base model's verified samples are all no-call answers
(it never calls a tool), so they only ever added abstentions."""
from __future__ import annotations

from pathlib import Path

import pytest

from data import jsonl
from data.filters import Decontaminator
from data.trajectory import Trajectory
from engine.runstore import RunStore
from pipeline.config import RunConfig
from rounds import grounding
from rounds.common import RoundContext


class Opened(Exception):
    pass


def run_round(tmp_path: Path, monkeypatch, **settings) -> RoundContext:
    def no_engine(model_dir):
        raise Opened(str(model_dir))
    monkeypatch.setattr(grounding, "train", lambda ctx, rows, base: Path(ctx.dir) / "model")
    ctx = RoundContext(cfg=RunConfig(), settings=grounding.GroundingSettings(
                           tasks={"single": 3, "mismatch": 2}, oracle=True, **settings),
                       store=RunStore(tmp_path / "run"), number=1, name="grounding",
                       start_model=tmp_path / "base", decontaminator=Decontaminator([]),
                       open_backend=no_engine, progress=False)
    grounding.run(ctx)
    return ctx


def test_round_one_can_train_on_oracles_alone(tmp_path, monkeypatch):
    ctx = run_round(tmp_path, monkeypatch, sample_start=False)
    rows = jsonl.read_all(ctx.dir / "accepted.jsonl", Trajectory)
    assert len(rows) == 5 and {r.source for r in rows} == {"oracle"}
    done = RunStore(tmp_path / "run").state()["rounds"]["1"]["done"]
    assert "rollouts" not in done and done["accepted"]["by_source"] == {"oracle": 5}


def test_round_one_samples_the_start_model_by_default(tmp_path, monkeypatch):
    with pytest.raises(Opened, match="base"):
        run_round(tmp_path, monkeypatch)
