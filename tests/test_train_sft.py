"""SFT on a tiny random Llama with the real tokenizer: parameters move, loss falls, the merged
model equals the adapter model, and a killed run resumes from its checkpoint."""
import json
import shutil

import torch

from data.tasks import generate
from data.trajectory import Trajectory
from engine.models import load_model, tiny_model_dir
from engine.training.settings import LoraSettings, SFTSettings
from engine.training.sft import sft_trainer, train_sft

LORA = LoraSettings(r=8, alpha=16, dropout=0.0)


def oracles(kinds):
    return [Trajectory(id=t.id, task_id=t.id, domain=t.domain, kind=t.kind,
                       messages=t.messages() + t.oracle, tools=t.tools, finish="answer",
                       source="oracle") for t in generate(kinds)]


def assistant_loss(model, dataset) -> float:
    """Mean loss over labelled (assistant) tokens, plain forward with full logits."""
    total = count = 0.0
    model.eval()
    with torch.no_grad():
        for row in dataset:
            ids = torch.tensor([row["input_ids"]])
            labels = torch.tensor([row["labels"]])
            n = int((labels[:, 1:] != -100).sum())
            total += model(input_ids=ids, labels=labels).loss.item() * n
            count += n
    return total / count


def test_sft_changes_every_lora_parameter_and_lowers_loss(tmp_path):
    rows = oracles({"reasoning": 4, "single": 2})
    settings = SFTSettings(lora=LORA, lr=1e-2, max_steps=4, batch_size=3, packing=True,
                           max_length=1024, save_steps=100)
    trainer, info = sft_trainer(rows, tiny_model_dir(64), tmp_path, settings, progress=False)
    assert info["rows_used"] == 6 and info["rows_dropped_over_length"] == 0
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()
              if p.requires_grad}
    assert before and all("lora_" in n for n in before)
    loss0 = assistant_loss(trainer.model, trainer.train_dataset)
    trainer.train()
    after = dict(trainer.model.named_parameters())
    unchanged = [n for n, p in before.items() if torch.equal(p, after[n].detach())]
    assert unchanged == []
    loss1 = assistant_loss(trainer.model, trainer.train_dataset)
    assert loss1 < loss0 - 0.05, (loss0, loss1)


def test_train_sft_outputs_merge_and_resume(tmp_path):
    rows = oracles({"reasoning": 3, "chained": 1})
    settings = SFTSettings(lora=LORA, lr=5e-3, max_steps=2, batch_size=2, save_steps=1)
    stats = train_sft(rows, tiny_model_dir(64), tmp_path, settings, progress=False)
    assert stats["steps"] == 2 and stats["rows_used"] == 4 and stats["tokens_seen"] > 0
    assert stats["tokens_per_s"] > 0 and stats["final_loss"] is not None
    assert stats["loss_last_tenth"] == stats["final_loss"]      # 2 steps: a tenth is one step
    for name in ("adapter/adapter_config.json", "adapter/adapter_model.safetensors",
                 "model/model.safetensors", "model/config.json", "model/tokenizer.json",
                 "loss.png", "train_log.jsonl"):
        assert (tmp_path / name).exists(), name
    log = [json.loads(x) for x in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "loss" in r] == [1, 2]

    # Merge + reload gives the adapter model's logits.
    from peft import PeftModel
    ids = torch.tensor([[1, 520, 9050, 28, 3060, 42, 2, 198, 1, 520]])
    adapter = PeftModel.from_pretrained(load_model(tiny_model_dir(64)), tmp_path / "adapter")
    merged = load_model(tmp_path / "model")
    with torch.no_grad():
        a, m = adapter.eval()(input_ids=ids).logits, merged.eval()(input_ids=ids).logits
        base = load_model(tiny_model_dir(64)).eval()(input_ids=ids).logits
    assert torch.allclose(a, m, atol=1e-4)
    assert (a - base).abs().max() > 1e-3  # the adapter did change the model
    assert "{% generation %}" not in (tmp_path / "model" / "chat_template.jinja").read_text()

    # A kill after step 1: the step-2 checkpoint and the outputs never got written.
    for name in ("checkpoints/checkpoint-2", "adapter", "model"):
        shutil.rmtree(tmp_path / name)
    stats = train_sft(rows, tiny_model_dir(64), tmp_path, settings, progress=False)
    assert stats["resumed_from_step"] == 1 and stats["steps"] == 2
    log = [json.loads(x) for x in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "loss" in r] == [1, 2]
    assert (tmp_path / "model" / "model.safetensors").exists()
