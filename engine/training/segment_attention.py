"""Padding-free attention without a varlen kernel: SDPA once per row of the flattened batch.

Padding-free SFT flattens a micro-batch into one sequence (1, N) whose position ids restart at
every row. Transformers then builds a block-diagonal mask and, on a device without varlen
flash-attention (CPU), SDPA scores all N x N pairs with it: the four rows of a batch cost the
attention of one row of their summed length, and a masked call cannot skip the causal upper
triangle. `segment_sdpa` cuts the flattened query, key and value at the row starts and runs
transformers' own SDPA forward on each row with `is_causal` and no mask, so each row costs its
own causal attention and nothing else. The rows never saw each other, so outputs, losses and
gradients are those of the masked call, up to rounding.

`use_segment_attention(model)` switches a loaded model to it; anything that is not one flattened
batch with position ids (a padded batch, generation with a cache) goes to plain SDPA.
"""
from __future__ import annotations

import torch

NAME = "segment_sdpa"


def row_bounds(position_ids: torch.Tensor) -> list[int]:
    """Start offsets of the rows in a flattened (1, N) batch, and N at the end: a row starts
    where the position does not continue the previous one."""
    pos = position_ids[0]
    starts = torch.ones_like(pos, dtype=torch.bool)
    starts[1:] = pos[1:] != pos[:-1] + 1
    return starts.nonzero().flatten().tolist() + [pos.numel()]


def segment_sdpa(module, query, key, value, attention_mask, dropout: float = 0.0,
                 scaling: float | None = None, **kwargs):
    """Transformers' SDPA attention, run row by row over a flattened batch (see module doc)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    position_ids = kwargs.pop("position_ids", None)
    flattened = (position_ids is not None and query.shape[0] == 1
                 and query.shape[2] == key.shape[2] == position_ids.shape[-1])
    if not flattened:
        return sdpa_attention_forward(module, query, key, value, attention_mask,
                                      dropout=dropout, scaling=scaling, **kwargs)
    bounds = row_bounds(position_ids)
    if len(bounds) == 2:   # one row: the whole sequence, causal
        return sdpa_attention_forward(module, query, key, value, None, dropout=dropout,
                                      scaling=scaling, **kwargs)
    rows = [sdpa_attention_forward(module, query[:, :, a:b], key[:, :, a:b],
                                   value[:, :, a:b], None, dropout=dropout, scaling=scaling,
                                   **kwargs)[0]
            for a, b in zip(bounds, bounds[1:])]
    return torch.cat(rows, dim=1), None   # (1, N, heads, head_dim), as SDPA returns


def register() -> str:
    """Make `segment_sdpa` an attention implementation of transformers (its mask: SDPA's)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask
    AttentionInterface.register(NAME, segment_sdpa)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)
    return NAME


def use_segment_attention(model) -> bool:
    """Switch `model` (and its PEFT wrapper's base) from SDPA to row-by-row SDPA; False, and
    nothing changed, when the model does not run SDPA."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    model.set_attn_implementation(register())
    return True
