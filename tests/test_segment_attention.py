"""Row attention for padding-free batches: the row bounds, the same logits, loss and gradients as
the masked SDPA call (and as each row alone) on a tiny random Llama, the fallback for padded
batches, and what SFT turns on by default."""
import pytest
import torch

from data.tasks import generate
from data.trajectory import Trajectory
from engine.models import load_model
from engine.training.segment_attention import NAME, row_bounds, use_segment_attention
from engine.training.settings import LoraSettings, SFTSettings, bf16_supported
from engine.training.sft import sft_trainer

LENGTHS = [37, 80, 5, 120]


def flattened():
    torch.manual_seed(0)
    ids = torch.randint(0, 40_000, (1, sum(LENGTHS)))
    pos = torch.cat([torch.arange(n) for n in LENGTHS])[None]
    return ids, pos


def test_row_bounds_cut_where_positions_restart():
    pos = torch.tensor([[0, 1, 2, 0, 1, 0, 1, 2, 3]])
    assert row_bounds(pos) == [0, 3, 5, 9]
    assert row_bounds(torch.arange(6)[None]) == [0, 6]
    assert row_bounds(torch.tensor([[5, 6, 7, 0, 1]])) == [0, 3, 5]   # a row may start late


def test_rows_attend_as_under_the_block_mask_and_as_alone(tiny_model):
    ids, pos = flattened()
    labels = ids.clone()
    masked, rows = (load_model(tiny_model) for _ in range(2))
    assert use_segment_attention(rows) and rows.config._attn_implementation == NAME
    out = {}
    for name, model in (("masked", masked), ("rows", rows)):
        res = model(input_ids=ids, position_ids=pos, labels=labels, use_cache=False)
        res.loss.backward()
        out[name] = (res.logits.detach(), res.loss.item(),
                     {n: p.grad for n, p in model.named_parameters()})
    with torch.no_grad():
        starts = [0, *torch.tensor(LENGTHS).cumsum(0).tolist()]
        alone = torch.cat([masked(input_ids=ids[:, a:b]).logits
                           for a, b in zip(starts, starts[1:])], dim=1)
    assert torch.allclose(out["rows"][0], out["masked"][0], atol=1e-4)
    assert torch.allclose(out["rows"][0], alone, atol=1e-4)
    assert out["rows"][1] == pytest.approx(out["masked"][1], abs=1e-5)
    for name, grad in out["masked"][2].items():
        assert torch.allclose(out["rows"][2][name], grad, atol=1e-5), name


def test_padded_batches_and_generation_fall_back_to_sdpa(tiny_model):
    plain, rows = load_model(tiny_model), load_model(tiny_model)
    use_segment_attention(rows)
    ids = torch.randint(0, 40_000, (2, 30))
    mask = torch.ones_like(ids)
    mask[1, 20:] = 0
    with torch.no_grad():
        a = plain(input_ids=ids, attention_mask=mask).logits
        b = rows(input_ids=ids, attention_mask=mask).logits
        ga = plain.generate(ids[:1, :10], max_new_tokens=5, do_sample=False)
        gb = rows.generate(ids[:1, :10], max_new_tokens=5, do_sample=False)
    assert torch.equal(a, b)
    assert torch.equal(ga, gb)


def oracle_rows():
    return [Trajectory(id=t.id, task_id=t.id, domain=t.domain, kind=t.kind,
                       messages=t.messages() + t.oracle, tools=t.tools, finish="answer",
                       source="oracle") for t in generate({"single": 2, "chained": 2})]


def test_sft_defaults_row_attention_and_a_bf16_base_under_autocast(tiny_model, tmp_path):
    lora = LoraSettings(r=4, alpha=8, dropout=0.0)
    trainer, info = sft_trainer(oracle_rows(), tiny_model, tmp_path,
                                SFTSettings(lora=lora, max_length=1024), progress=False)
    assert info["row_attention"] is True
    base = {p.dtype for n, p in trainer.model.named_parameters() if "lora_" not in n}
    adapter = {p.dtype for n, p in trainer.model.named_parameters() if "lora_" in n}
    assert adapter == {torch.float32}
    if bf16_supported():
        assert base == {torch.bfloat16} and trainer.autocast_adapters
    else:
        assert base == {torch.float32}
    # padded batches keep SDPA; base_dtype float32 keeps a float32 base
    trainer, info = sft_trainer(oracle_rows(), tiny_model, tmp_path / "b",
                                SFTSettings(lora=lora, max_length=1024, padding_free=False,
                                            base_dtype="float32"), progress=False)
    assert info["row_attention"] is False
    assert {p.dtype for n, p in trainer.model.named_parameters()
            if "lora_" not in n} == {torch.float32}


def test_a_bf16_base_needs_autocast():
    with pytest.raises(ValueError, match="sft.base_dtype is bfloat16 but sft.bf16 is false"):
        SFTSettings(base_dtype="bfloat16", bf16=False)
    assert SFTSettings(bf16=False).base_weights_dtype == "float32"
    if bf16_supported():
        assert SFTSettings(bf16=True).base_weights_dtype == "bfloat16"
        assert SFTSettings(bf16=True, base_dtype="float32").base_weights_dtype == "float32"
