"""GRPO: the multi-turn rollout (tools executed, tokens consistent, masks right), the rewards,
and a short real TRL run on a tiny model that has learnt to end its turns."""
import json

import pytest
import torch

from data.chatformat import render
from data.tasks import generate
from engine.models import load_model, load_tokenizer, tiny_model_dir
from engine.training.consistency import tokenize_conversation
from engine.training.grpo import (format_reward, make_rollout_func, tool_calls, train_grpo,
                                    unfinished, verifier)
from engine.training.lora import training_tokenizer
from engine.training.settings import GRPOSettings, LoraSettings


class ScriptedTrainer:
    """Stands in for TRL's generation step: answers each context with the oracle turn that
    follows it. Contexts are looked up by their exact ids, so a rollout whose token stream
    drifted from the tokenized conversation finds no answer (KeyError)."""

    def __init__(self, tok, tasks, reply=None):
        self.script, self.reply = {}, reply
        for t in tasks:
            msgs = t.messages()
            for m in t.oracle:
                if m["role"] == "assistant":
                    ctx = tok(render(msgs, t.tools, add_generation_prompt=True),
                              add_special_tokens=False)["input_ids"]
                    self.script[tuple(ctx)] = (tok(m["content"], add_special_tokens=False)
                                               ["input_ids"] + [tok.eos_token_id])
                msgs = msgs + [m]

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations):
        if self.reply is not None:
            return [list(self.reply) for _ in prompt_ids], None
        return [self.script[tuple(p)] for p in prompt_ids], None


def prompts_for(tasks):
    return [[{**t.messages()[0], "task_id": t.id}, *t.messages()[1:]] for t in tasks]


@pytest.fixture(scope="module")
def tok():
    return training_tokenizer(tiny_model_dir(64))


def test_rollout_runs_tools_over_turns_with_consistent_tokens(tok):
    tasks = generate({"chained": 2, "parallel": 1, "recovery": 2, "reasoning": 1,
                      "irrelevance": 1})
    rollout = make_rollout_func({t.id: t for t in tasks}, tok, GRPOSettings(max_turns=6))
    out = rollout(prompts_for(tasks), ScriptedTrainer(tok, tasks))
    assert out["finish"] == ["answer"] * len(tasks)
    assert out["logprobs"] is None  # transformers generation gives none; TRL recomputes them
    for i, t in enumerate(tasks):
        full = t.messages() + t.oracle
        assert out["messages"][i] == full  # tool results come from the real environment
        assert out["n_calls"][i] == sum(m["role"] == "tool" for m in t.oracle)
        whole = tokenize_conversation(tok, full, t.tools)
        ids = out["prompt_ids"][i] + out["completion_ids"][i]
        assert ids == whole["input_ids"][:len(ids)]
        assert tok.decode(whole["input_ids"][len(ids):]) == "\n"  # only the closing newline
        assert out["env_mask"][i] == whole["assistant_masks"][len(out["prompt_ids"][i]):len(ids)]
    cols = {k: out[k] for k in ("messages", "finish", "n_prompt", "n_calls")}
    task_json = [t.model_dump_json() for t in tasks]
    assert verifier(None, task=task_json, **cols) == [1.0] * len(tasks)
    assert format_reward(None, task=task_json, **cols) == [1.0] * len(tasks)
    assert tool_calls(None, **cols) == [float(n) for n in out["n_calls"]]
    assert unfinished(None, **cols) == [0.0] * len(tasks)


def test_rollout_records_cut_off_and_malformed_turns(tok):
    tasks = generate({"single": 2})
    by_id = {t.id: t for t in tasks}
    cut = ScriptedTrainer(tok, tasks, reply=tok("The weather is", add_special_tokens=False)
                          ["input_ids"])
    out = make_rollout_func(by_id, tok, GRPOSettings())(prompts_for(tasks), cut)
    assert out["finish"] == ["token_limit"] * 2 and out["n_calls"] == [0, 0]
    cols = {k: out[k] for k in ("messages", "finish", "n_prompt", "n_calls")}
    task_json = [t.model_dump_json() for t in tasks]
    assert format_reward(None, task=task_json, **cols) == [0.0, 0.0]
    assert unfinished(None, **cols) == [1.0, 1.0]
    assert all(v < 0.6 for v in verifier(None, task=task_json, **cols))

    bad = tok('<tool_call>\n{"name": "get_weather", "arguments": {\n</tool_call>',
              add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    out = make_rollout_func(by_id, tok, GRPOSettings())(prompts_for(tasks),
                                                       ScriptedTrainer(tok, tasks, reply=bad))
    assert out["finish"] == ["parse_error"] * 2
    cols = {k: out[k] for k in ("messages", "finish", "n_prompt", "n_calls")}
    assert format_reward(None, task=task_json, **cols) == [0.0, 0.0]


@pytest.fixture(scope="module")
def stopping_model(tmp_path_factory):
    """The tiny random model, briefly fine-tuned (all weights, plain PyTorch) on reasoning
    oracles so that some sampled turns end with <|im_end|> and some run out of tokens: the
    group's rewards then differ, which is what GRPO can move."""
    path = tmp_path_factory.mktemp("stopping")
    tok, model = load_tokenizer(tiny_model_dir(64)), load_model(tiny_model_dir(64))
    torch.manual_seed(0)
    batch = []
    for t in generate({"reasoning": 4}, namespace="fixture"):
        x = tokenize_conversation(tok, t.messages() + t.oracle, t.tools)
        ids = torch.tensor([x["input_ids"]])
        labels = ids.masked_fill(torch.tensor([x["assistant_masks"]]) == 0, -100)
        batch.append((ids, labels))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(22):
        for ids, labels in batch:
            model(input_ids=ids, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.mark.slow  # loads a model and trains: not while a pipeline run holds the CPUs
def test_grpo_run_logs_reward_and_kl_and_moves_the_adapter(tmp_path, stopping_model):
    tasks = generate({"reasoning": 4})
    settings = GRPOSettings(lora=LoraSettings(r=8, alpha=16, dropout=0.0), group_size=4,
                            tasks_per_step=2, max_steps=3, max_new_tokens=24, max_turns=2,
                            lr=5e-3, beta=0.04, save_steps=100)
    stats = train_grpo(tasks, stopping_model, tmp_path, settings, progress=False)
    assert stats["steps"] == 3 and stats["generation"] == "transformers"
    log = [json.loads(x) for x in (tmp_path / "grpo_log.jsonl").read_text().splitlines()]
    steps = [r for r in log if "reward" in r]
    assert [r["step"] for r in steps] == [1, 2, 3]
    for r in steps:
        assert 0.0 <= r["reward"] <= 1.1 and r["kl"] >= 0.0
        assert 0.0 <= r["rewards/unfinished/mean"] <= 1.0
        assert "rewards/tool_calls/mean" in r
        # groups of equal rewards are dropped from the loss; TRL counts the same groups
        assert r["zero_variance_share"] == pytest.approx(r["frac_reward_zero_std"])
        assert r["zero_variance_share"] in (0.0, 0.5, 1.0)  # 2 groups per step
    assert stats["zero_variance_share"] == [r["zero_variance_share"] for r in steps]
    assert stats["zero_variance_dropped"] is True
    assert stats["zero_variance_share_mean"] == pytest.approx(
        sum(stats["zero_variance_share"]) / 3, abs=1e-4)
    assert any(r["reward_std"] > 0 for r in steps)  # the group's rewards differed
    assert (tmp_path / "grpo.png").stat().st_size > 1000
    print(f"GRPO tiny: {stats['seconds_per_step']} s/step, zero-variance share per step "
          f"{stats['zero_variance_share']}")
    from safetensors.torch import load_file
    lora = load_file(tmp_path / "adapter" / "adapter_model.safetensors")
    b = [v for k, v in lora.items() if "lora_B" in k]
    assert b and all(v.abs().max() > 0 for v in b)  # B starts at zero: nonzero means trained
    assert (tmp_path / "model" / "model.safetensors").exists()
