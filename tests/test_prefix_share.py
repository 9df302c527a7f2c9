"""Shared-prefix SFT: the grouped batch order, the prefix bound, exact loss and gradients against
the padded forward on a tiny random Llama, the fallback, and the settings that conflict."""
import pytest
import torch

from data.tasks import generate
from data.trajectory import Trajectory
from engine.models import tiny_model_dir
from engine.training.prefix_share import (prefix_batches, shared_prefix_length,
                                            usable_prefix)
from engine.training.settings import LoraSettings, SFTSettings
from engine.training.sft import sft_trainer


def family_keys():
    """23 rows in three prefix families of 9, 6 and 8 rows (40 shared tokens each, then a
    distinct tail per row)."""
    sizes = {1: 9, 2: 6, 3: 8}
    keys, family = [], []
    for fam, n in sizes.items():
        for i in range(n):
            keys.append([fam] * 40 + [100 + len(keys), i])
            family.append(fam)
    return keys, family


def test_grouped_batches_cover_every_row_once_and_are_deterministic():
    keys, family = family_keys()
    batches = prefix_batches(keys, 4, seed=0)
    assert sorted(r for b in batches for r in b) == list(range(23))
    assert batches == prefix_batches(keys, 4, seed=0)
    assert batches != prefix_batches(keys, 4, seed=1)
    assert batches != prefix_batches(keys, 4, seed=0, epoch=1)
    # 9 // 4 + 6 // 4 + 8 // 4 = 5 single-family batches; the 1 + 2 + 0 leftovers fill one
    # short batch, and it comes last (the loader cuts the index stream every 4)
    assert [len(b) for b in batches] == [4, 4, 4, 4, 4, 3]
    assert all(len({family[r] for r in b}) == 1 for b in batches[:5])
    assert len({family[r] for r in batches[5]}) == 2


def test_lengths_put_similar_rows_together_inside_a_prefix():
    """One family of 8 rows: by length, the 4 longest form one batch and the 4 shortest the
    other, whatever the seed; without lengths the seed decides."""
    keys = [[1] * 40 + [i] for i in range(8)]
    lengths = [100, 900, 120, 800, 110, 950, 130, 850]
    for seed in range(3):
        batches = prefix_batches(keys, 4, seed=seed, lengths=lengths)
        assert sorted(map(sorted, batches)) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    plain = {tuple(sorted(prefix_batches(keys, 4, seed=s)[0])) for s in range(6)}
    assert len(plain) > 2


def test_grouped_batches_fill_mixed_batches_from_leftovers():
    # families of 3, 3 and 2 rows: no full batch inside one, so leftovers pool at the root
    keys = [[f] * 40 + [i] for f, n in ((1, 3), (2, 3), (3, 2)) for i in range(n)]
    batches = prefix_batches(keys, 4, seed=3)
    assert sorted(r for b in batches for r in b) == list(range(8))
    assert [len(b) for b in batches] == [4, 4]


def test_prefix_stops_before_the_first_label():
    ids = torch.tensor([[5] * 50 + [6, 7], [5] * 50 + [8, 9]])
    mask = torch.ones_like(ids)
    labels = torch.full_like(ids, -100)
    labels[0, 45:] = ids[0, 45:]        # row 0: first label at 45, scored from position 44
    labels[1, 51:] = ids[1, 51:]
    assert shared_prefix_length(ids, labels, mask) == 44
    labels[0, :] = -100
    labels[0, 51] = 6                    # now the token mismatch (50) bounds it
    assert shared_prefix_length(ids, labels, mask) == 50
    assert shared_prefix_length(ids[:1], labels[:1], mask[:1]) == 0     # batch of 1
    assert usable_prefix([1, 2, 3, 4], [-100, -100, 3, 4]) == [1]


def single_call_trainer(tmp_path, dropout=0.0):
    # 8 single-call tasks: two batches of 4, one of them 4 weather rows sharing their tools
    tasks = generate({"single": 8}, namespace="t")
    rows = [Trajectory(id=t.id, task_id=t.id, domain=t.domain, kind=t.kind,
                       messages=t.messages() + t.oracle, tools=t.tools, finish="answer",
                       source="oracle") for t in tasks]
    settings = SFTSettings(lora=LoraSettings(r=8, alpha=16, dropout=dropout), batch_size=4,
                           max_steps=1, max_length=1024, save_steps=100, share_prefix=True,
                           base_dtype="float32")   # exact comparisons: a float32 forward
    assert settings.share_prefix and not settings.padding_free
    trainer, _ = sft_trainer(rows, tiny_model_dir(64), tmp_path, settings, progress=False)
    trainer.model.train()
    return trainer


def loss_and_grads(trainer, batch, share):
    trainer.share_prefix = share
    trainer.model.zero_grad()
    n = (batch["labels"][:, 1:] != -100).sum()
    loss = trainer.compute_loss(trainer.model, dict(batch), num_items_in_batch=n)
    loss.backward()
    return loss.item(), {k: p.grad.clone() for k, p in trainer.model.named_parameters()
                         if p.requires_grad}


def test_shared_prefix_loss_and_gradients_equal_the_padded_forward(tmp_path):
    trainer = single_call_trainer(tmp_path)
    batches = list(trainer.get_train_dataloader())
    prefixes = sorted(shared_prefix_length(b["input_ids"], b["labels"], b["attention_mask"])
                      for b in batches)
    assert len(batches) == 2 and prefixes[0] >= 32 and prefixes[1] > 300  # the tool set
    for batch in batches:
        plain, g_plain = loss_and_grads(trainer, batch, share=False)
        shared, g_shared = loss_and_grads(trainer, batch, share=True)
        assert abs(plain - shared) < 1e-5 and plain > 1.0
        assert g_plain.keys() == g_shared.keys() and all("lora_" in k for k in g_plain)
        for k in g_plain:
            assert torch.allclose(g_plain[k], g_shared[k], atol=1e-5, rtol=0), k
        assert any(g.abs().max() > 1e-6 for g in g_plain.values())
    assert trainer.prefix_batches_shared == 2
    assert trainer.prefix_tokens_shared == 3 * sum(prefixes)


def test_short_prefix_and_single_row_take_the_plain_path(tmp_path):
    trainer = single_call_trainer(tmp_path)
    batch = next(iter(trainer.get_train_dataloader()))
    short = dict(batch, input_ids=batch["input_ids"].clone())
    short["input_ids"][1, 20] += 1                 # rows now part at position 20 (< 32)
    assert shared_prefix_length(short["input_ids"], short["labels"],
                                short["attention_mask"]) == 20
    loss_and_grads(trainer, short, share=True)
    one = {k: v[:1] for k, v in batch.items()}
    loss_and_grads(trainer, one, share=True)
    assert trainer.prefix_batches_shared == 0 and trainer.prefix_tokens_shared == 0


def test_share_prefix_conflicts_fail_clearly_and_defaults_yield():
    with pytest.raises(ValueError, match="share_prefix is true but so is sft.packing"):
        SFTSettings(share_prefix=True, packing=True)
    with pytest.raises(ValueError, match="sft.padding_free"):
        SFTSettings(share_prefix=True, padding_free=True)
    with pytest.raises(ValueError, match="gradient_checkpointing"):
        SFTSettings(share_prefix=True, gradient_checkpointing=True)
    packed = SFTSettings(packing=True)          # the long-context round: packing wins
    assert packed.share_prefix is False and packed.padding_free is True
    off = SFTSettings(share_prefix=False)
    assert off.padding_free is True
    again = SFTSettings(**SFTSettings().model_dump())     # a recorded run.yaml reloads
    assert again.share_prefix is False and again.padding_free is True     # off by default
    on = SFTSettings(**SFTSettings(share_prefix=True).model_dump())
    assert on.share_prefix is True and on.padding_free is False


def test_grouped_batches_without_sharing_run_padding_free(tmp_path):
    """group_by_prefix alone: the shared-prefix batches, each one padding-free plain forward
    (the batches' composition changes, the arithmetic is the default's)."""
    grouped = SFTSettings(group_by_prefix=True)
    assert (grouped.group_by_prefix, grouped.share_prefix, grouped.padding_free) == \
        (True, False, True)
    assert SFTSettings().group_by_prefix is False
    assert SFTSettings(share_prefix=True).group_by_prefix is True
    with pytest.raises(ValueError, match="group_by_prefix is false"):
        SFTSettings(share_prefix=True, group_by_prefix=False)
    tasks = generate({"single": 8}, namespace="t")
    rows = [Trajectory(id=t.id, task_id=t.id, domain=t.domain, kind=t.kind,
                       messages=t.messages() + t.oracle, tools=t.tools, finish="answer",
                       source="oracle") for t in tasks]
    settings = SFTSettings(lora=LoraSettings(r=8, alpha=16, dropout=0.0), batch_size=4,
                           max_steps=1, max_length=1024, save_steps=100, group_by_prefix=True)
    trainer, _ = sft_trainer(rows, tiny_model_dir(64), tmp_path, settings, progress=False)
    shared = SFTSettings(**{**settings.model_dump(), "share_prefix": True,
                            "padding_free": False})
    ref, _ = sft_trainer(rows, tiny_model_dir(64), tmp_path / "ref", shared, progress=False)
    order = list(trainer._get_train_sampler())
    assert order == list(ref._get_train_sampler()) and sorted(order) == list(range(8))
    batch = next(iter(trainer.get_train_dataloader()))
    assert batch["input_ids"].shape[0] == 1             # padding-free: one flat sequence
    trainer.train()
    assert trainer.prefix_tokens_shared == 0 and trainer.state.global_step == 1


def test_resume_replays_the_grouped_order(tmp_path):
    import json
    import shutil

    from engine.training.sft import train_sft
    tasks = generate({"single": 8}, namespace="t")
    rows = [Trajectory(id=t.id, task_id=t.id, domain=t.domain, kind=t.kind,
                       messages=t.messages() + t.oracle, tools=t.tools, finish="answer",
                       source="oracle") for t in tasks]
    settings = SFTSettings(lora=LoraSettings(r=8, alpha=16, dropout=0.0), batch_size=2, lr=1e-2,
                           max_steps=3, max_length=1024, save_steps=1, share_prefix=True)

    def losses():
        log = (tmp_path / "train_log.jsonl").read_text().splitlines()
        return [json.loads(x)["loss"] for x in log if "loss" in json.loads(x)]
    stats = train_sft(rows, tiny_model_dir(64), tmp_path, settings, progress=False)
    assert stats["share_prefix"] and stats["prefix_tokens_shared"] > 0
    straight = losses()
    for name in ("checkpoints/checkpoint-3", "adapter", "model"):   # killed during step 3
        shutil.rmtree(tmp_path / name)
    stats = train_sft(rows, tiny_model_dir(64), tmp_path, settings, progress=False)
    assert stats["resumed_from_step"] == 2 and stats["steps"] == 3
    assert len(straight) == 3 and losses() == pytest.approx(straight, abs=1e-6)
