"""The step-curve plotter both trainers use: step rows only, one panel per key, none when empty."""
import json

from engine.training.curves import plot_curves, step_rows
from engine.training.panels import GRPO_PANELS, SFT_PANELS


def test_step_rows_skip_the_summary_and_a_torn_line(tmp_path):
    log = tmp_path / "train_log.jsonl"
    rows = [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.5}, {"step": 2, "train_loss": 1.7}]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 3, "lo')
    assert step_rows(log, SFT_PANELS) == rows[:2]
    assert step_rows(tmp_path / "missing.jsonl", SFT_PANELS) == []


def test_plot_curves_writes_one_png_or_none(tmp_path):
    log = tmp_path / "grpo_log.jsonl"
    log.write_text(json.dumps({"step": 1, "reward": 0.2, "kl": 0.0}) + "\n"
                   + json.dumps({"step": 2, "reward": 0.4, "kl": 0.01}) + "\n")
    png = plot_curves(log, tmp_path / "grpo.png", GRPO_PANELS, "GRPO")  # two panels unlogged
    assert png == tmp_path / "grpo.png" and png.stat().st_size > 1000
    assert not list(tmp_path.glob("*.tmp.png"))
    assert plot_curves(log, tmp_path / "loss.png", SFT_PANELS, "SFT") is None
    assert not (tmp_path / "loss.png").exists()
