"""Loss mask, token consistency and row filtering: real tokenizer, real TRL preparation."""
import pytest
from pydantic import ValidationError

from data.tasks import generate
from data.trajectory import Trajectory
from engine.models import tiny_model_dir
from engine.training.consistency import (TemplateRoundTripError, assistant_spans,
                                           check_consistency, normalise_messages,
                                           tokenize_conversation)
from engine.training.lora import training_tokenizer
from engine.training.settings import GRPOSettings, LoraSettings, SFTSettings
from engine.training.sft import build_rows, sft_trainer, train_sft


def oracle(task, turn_ids=None) -> Trajectory:
    return Trajectory(id=task.id, task_id=task.id, domain=task.domain, kind=task.kind,
                      messages=task.messages() + task.oracle, tools=task.tools,
                      finish="answer", source="oracle", turn_token_ids=turn_ids or [])


def sampled(tok, task, edit=lambda text: text, eos=True) -> list[list[int]]:
    """Ids a sampler would have produced for each oracle assistant turn."""
    return [tok(edit(m["content"]), add_special_tokens=False)["input_ids"]
            + ([tok.eos_token_id] if eos else []) for m in task.oracle if m["role"] == "assistant"]


@pytest.fixture(scope="module")
def tok():
    return training_tokenizer(tiny_model_dir(64))


@pytest.fixture(scope="module")
def chained():
    task = next(t for t in generate({"chained": 6})
                if sum(m["role"] == "assistant" for m in t.oracle) == 3)
    return task


def test_three_turn_trajectory_labels_exactly_the_assistant_text(tmp_path, tok, chained):
    trainer, info = sft_trainer([oracle(chained)], tiny_model_dir(64), tmp_path,
                                SFTSettings(max_steps=1, padding_free=False), progress=False)
    row = trainer.train_dataset[0]
    ids, labels = row["input_ids"], row["labels"]
    spans = assistant_spans([int(x != -100) for x in labels])
    turns = [m["content"] for m in chained.oracle if m["role"] == "assistant"]
    assert len(spans) == 3 == len(turns)
    for (a, b), text in zip(spans, turns):
        assert labels[a:b] == ids[a:b]
        assert tok.decode(ids[a:b]) == text + "<|im_end|>"
    labelled = tok.decode([i for i, lab in zip(ids, labels) if lab != -100])
    assert labelled == "".join(t + "<|im_end|>" for t in turns)
    # System prompt, user prompt and tool responses carry no loss.
    assert "<tool_response>" not in labelled and chained.prompt not in labelled
    assert info["rows_used"] == 1 and info["assistant_tokens"] == sum(b - a for a, b in spans)


def test_sampled_tokens_round_trip(tok, chained):
    single = generate({"single": 2, "reasoning": 2})
    trajs = [oracle(t, sampled(tok, t)) for t in [chained, *single]]
    # A sampler stopped by `</tool_call>` returns no end-of-turn id; that is still consistent.
    trajs.append(oracle(chained, sampled(tok, chained, eos=False)).model_copy(update={"id": "x"}))
    out = check_consistency(trajs, tok)
    assert out == {"checked": 6, "mismatched_turns": 0, "mismatched_trajectories": 0,
                   "render_mismatches": 0, "round_trips": True, "bad_ids": [], "examples": []}


def test_rewritten_turns_are_caught(tok, chained):
    # The sampler produced a trailing newline that the stored text lost, and a <think> block
    # that a template stripped: both change the trained tokens.
    ws = oracle(chained, sampled(tok, chained, edit=lambda s: s + "\n"))
    think = generate({"reasoning": 1})[0]
    stripped = oracle(think, sampled(tok, think))
    stripped.messages[-1] = {"role": "assistant",
                             "content": think.oracle[0]["content"].split("</think>\n")[1]}
    stripped.id = "stripped"
    good = oracle(think, sampled(tok, think))
    out = check_consistency([ws, stripped, good], tok)
    assert out["checked"] == 3
    assert out["mismatched_turns"] == 4          # 3 turns of `ws`, 1 of `stripped`
    assert out["bad_ids"] == [ws.id, "stripped"] and out["round_trips"]
    assert "turn 0" in out["examples"][0]["problems"][0]


def test_training_refuses_when_no_trajectory_round_trips(tmp_path, tok, chained):
    # Oracle rows (no sampled ids) do not hide that every sampled trajectory mismatches.
    bad = oracle(chained, sampled(tok, chained, edit=lambda s: " " + s))
    plain = oracle(generate({"reasoning": 1})[0])
    assert not check_consistency([bad, plain], tok)["round_trips"]
    with pytest.raises(TemplateRoundTripError, match="does not round-trip"):
        train_sft([bad, plain], tiny_model_dir(64), tmp_path, SFTSettings(max_steps=1),
                  progress=False)


def test_rows_over_max_length_are_dropped_and_counted(tok):
    tasks = generate({"reasoning": 2, "chained": 2})
    lengths = [len(tokenize_conversation(tok, t.messages() + t.oracle, t.tools)["input_ids"])
               for t in tasks]
    limit = sorted(lengths)[1]
    rows, stats = build_rows([oracle(t) for t in tasks], tok, limit)
    assert len(rows) == sum(n <= limit for n in lengths) == 2
    assert stats["rows_dropped_over_length"] == 2
    assert stats["tokens"] == sum(n for n in lengths if n <= limit)
    assert all(isinstance(r["tools"], str) for r in rows)


def test_structured_tool_calls_fold_into_identical_text():
    msg = {"role": "assistant", "content": "",
           "tool_calls": [{"function": {"name": "get_rate",
                                        "arguments": {"base": "EUR", "quote": "USD"}}}]}
    assert normalise_messages([msg]) == [{"role": "assistant", "content":
        '<tool_call>\n{"name": "get_rate", "arguments": {"base": "EUR", "quote": "USD"}}\n'
        '</tool_call>'}]


def test_settings_reject_bad_combinations():
    import torch
    if not torch.cuda.is_available():
        with pytest.raises(ValidationError, match="CUDA"):
            LoraSettings(qlora=True)
        with pytest.raises(ValidationError, match="CUDA"):
            GRPOSettings(use_vllm=True)
    with pytest.raises(ValidationError, match="extra"):
        SFTSettings(learning_rate=1e-4)
    with pytest.raises(ValidationError, match="unknown reward"):
        GRPOSettings(reward_weights={"verifier": 1.0, "length": 0.1})
    with pytest.raises(ValidationError, match="lm_head"):
        LoraSettings(target_modules=["q_proj", "lm_head"])
    assert SFTSettings().lora.target_modules[0] == "q_proj"
