"""Training curves: a per-step JSONL log written by a trainer callback, and its PNG plot.

The JSONL is the record (one row per logging step, the trainer's own numbers); the PNG is for
people reading a round's directory.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

from transformers import TrainerCallback
from transformers.trainer_callback import PrinterCallback, ProgressCallback

from data.jsonl import Appender, write_atomic
from engine.training.panels import panel_grid


class JsonlLog(TrainerCallback):
    """Append each training log (loss, reward, KL, ...) as one JSON row with its step.

    On resume, rows past the checkpoint's step are cut first: the trainer logs them again.
    """

    def __init__(self, path: Path, resume_step: int = 0):
        self.path, self._out = Path(path), None
        if int(os.environ.get("RANK", "0")) != 0:  # under `accelerate launch`: rank 0 writes
            return
        if self.path.exists():
            rows = [r for r in _read(self.path) if r.get("step", 0) <= resume_step]
            write_atomic(self.path, rows)
        self._out = Appender(self.path)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or self._out is None:
            return
        row = {"step": state.global_step}
        for k, v in logs.items():
            if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)):
                row[k] = v
        self._out.write(row)

    def on_train_end(self, args, state, control, **kwargs):
        if self._out is not None:
            self._out.close()
            self._out = None


class BarOnly(ProgressCallback):
    """The trainer's progress bar without the metric dict it writes under it at every log."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        pass


def bar_only(trainer) -> None:
    """Keep a trainer's console to its progress bar: the per-step metric dicts it would print
    (through the bar, or PrinterCallback without one) are in the JSONL log already."""
    trainer.remove_callback(PrinterCallback)
    if trainer.pop_callback(ProgressCallback) is not None:
        trainer.add_callback(BarOnly)


def _read(path: Path) -> list[dict]:
    rows = []
    for line in Path(path).read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a torn last line from a kill
            break
    return rows



def step_rows(log_path: Path, panels: list[tuple[str, str]]) -> list[dict]:
    """The log's per-step rows: those carrying the first panel's key (the trainer's closing
    summary row carries none)."""
    key = panels[0][0]
    return [r for r in _read(log_path) if key in r] if Path(log_path).exists() else []


def plot_curves(log_path: Path, png: Path, panels: list[tuple[str, str]],
                title: str) -> Path | None:
    """One subplot per `(key, label)` panel against step, written atomically to `png`; None
    when the log has no step rows."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = step_rows(log_path, panels)
    if not rows:
        return None
    fig, axes = panel_grid(plt, len(panels), 4, 3.2)
    for ax, (key, label) in zip(axes, panels):
        pts = [(r["step"], r[key]) for r in rows if key in r]
        if pts:
            ax.plot(*zip(*pts), marker="o", markersize=3)
        else:
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(label)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    png = Path(png)
    tmp = png.with_name(png.stem + ".tmp.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    tmp.replace(png)
    return png
