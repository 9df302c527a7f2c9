"""The fused LM head scores only labelled positions after the switch, with the same result."""
import torch
import trl.trainer.utils as trl_utils

from engine.models import load_model
from engine.training.fused_head import score_labelled_positions_only


def _fused(model_dir):
    model = load_model(model_dir, dtype="float32")
    trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))
    return model


def test_compact_head_matches_full_head(tiny_model, monkeypatch):
    torch.manual_seed(0)
    ids = torch.randint(0, 1000, (2, 40))
    labels = ids.clone()
    labels[:, :30] = -100           # a long unlabelled prompt, as in a tool-use row
    labels[1, 35:] = -100
    model = _fused(tiny_model)
    from trl.kernels.chunked_logprob import _use_triton as unpatched  # earlier tests may patch
    monkeypatch.setattr(trl_utils, "_use_triton", unpatched)               # restored afterwards
    assert not trl_utils._use_triton(ids.device)                           # CPU: full path
    full = model(input_ids=ids, labels=labels, fused_lm_head=True)
    assert score_labelled_positions_only()
    assert trl_utils._use_triton(ids.device)
    compact = model(input_ids=ids, labels=labels, fused_lm_head=True)
    assert torch.allclose(full.loss, compact.loss, atol=1e-6)
    assert torch.allclose(full.log_probs, compact.log_probs, atol=1e-6)
    assert torch.equal(full.label_mask, compact.label_mask)
    assert int(compact.label_mask.sum()) == 10 + 5                         # labels 30..39, 30..34
    assert (compact.log_probs[~compact.label_mask] == 0).all()
    compact.loss.backward()                                                # still differentiable
