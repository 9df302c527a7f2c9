"""Which logged keys each trainer's curves show: one list per trainer, read by the plot beside
its log (loss.png, grpo.png) and by the run report, so the two never show different curves.

A panel is `(log key, label)`; the first key marks a step row (the trainer's closing summary
row carries none). Light on purpose: the run report imports it without loading a trainer.
"""
SFT_PANELS = [("loss", "training loss (assistant tokens)")]
GRPO_PANELS = [("reward", "mean reward"), ("kl", "KL to start model"), ("loss", "GRPO loss"),
               ("rewards/tool_calls/mean", "tool calls / trajectory"),
               ("rewards/unfinished/mean", "unfinished share"),
               ("zero_variance_share", "groups dropped (equal rewards)")]
PER_ROW = 3


def panel_grid(plt, n: int, width: float, height: float):
    """A figure for `n` panels, `PER_ROW` to a row, each `width` x `height` inches, spare axes
    hidden: (figure, the n axes in reading order). Both curve plotters draw on it."""
    cols = min(n, PER_ROW)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    return fig, list(axes.flat[:n])
