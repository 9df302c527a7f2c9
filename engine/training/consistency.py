"""Rollout/training token consistency: the trainer must see the tokens the sampler generated.

Multi-turn training breaks silently when the training tokenization of a conversation differs
from what was sampled turn by turn: a template that drops an earlier `<think>`, whitespace
rewritten after the end-of-turn token, or a BPE merge across a turn boundary. For every
trajectory that carries `turn_token_ids` we tokenize it exactly as the SFT trainer does
(TRL's assistant mask over the `{% generation %}` training template) and compare each
assistant span with the sampled ids. We also check the template's text equals
`data.chatformat.render`, the string the sampler was prompted with.
"""
from __future__ import annotations

import json
from pathlib import Path

import data.chatformat as chatformat
from data.chatformat import CALL_OPEN, format_call, render

TRAINING_TEMPLATE_PATH = Path(chatformat.__file__).with_name("chat_template_training.jinja")


class TemplateRoundTripError(RuntimeError):
    """The chat template does not reproduce the sampled tokens of any trajectory."""


def training_template() -> str:
    """The project's chat template with `{% generation %}` around each assistant turn."""
    return TRAINING_TEMPLATE_PATH.read_text()


def normalise_messages(messages: list[dict]) -> list[dict]:
    """Messages as {role, content} strings only: structured `tool_calls` are folded into the
    content in the canonical form the template itself writes (byte-identical render), so the
    dataset has one column type and tool arguments never pick up other rows' keys."""
    out = []
    for msg in messages:
        content = msg.get("content") or ""
        calls = msg.get("tool_calls") or []
        if msg["role"] == "assistant" and calls and CALL_OPEN not in content:
            parts = [content] if content else []
            for call in calls:
                fn = call.get("function", call)
                args = fn.get("arguments", {})
                if isinstance(args, str):
                    args = json.loads(args)
                parts.append(format_call(fn["name"], args))
            content = "\n".join(parts)
        out.append({"role": msg["role"], "content": content})
    return out


def tokenize_conversation(tokenizer, messages: list[dict], tools: list[dict] | None) -> dict:
    """input_ids and assistant_masks exactly as TRL's SFT preparation computes them."""
    out = tokenizer.apply_chat_template(
        normalise_messages(messages), tools=tools or None, chat_template=training_template(),
        tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    return {"input_ids": list(out["input_ids"]), "assistant_masks": list(out["assistant_masks"])}


def assistant_spans(mask: list[int]) -> list[tuple[int, int]]:
    """[start, end) of each run of 1s: one per assistant turn."""
    spans, start = [], None
    for i, bit in enumerate(list(mask) + [0]):
        if bit and start is None:
            start = i
        elif not bit and start is not None:
            spans.append((start, i))
            start = None
    return spans


def _same_turn(sampled: list[int], span: list[int], eos_id: int | None) -> bool:
    # A sampler that stopped on a stop string (`</tool_call>`) has no end-of-turn id; the
    # driver closes the turn, so the sampled ids then equal the span without its last token.
    if sampled == span:
        return True
    return bool(span) and span[-1] == eos_id and sampled == span[:-1]


def check_trajectory(traj, tokenizer) -> list[str]:
    """Problems of one trajectory (empty when its tokens round-trip)."""
    problems = []
    messages = normalise_messages(traj.messages)
    text = tokenizer.apply_chat_template(messages, tools=traj.tools or None,
                                         chat_template=training_template(), tokenize=False)
    if text != render(messages, traj.tools):
        cut = next((i for i, (a, b) in enumerate(zip(text, render(messages, traj.tools)))
                    if a != b), min(len(text), len(render(messages, traj.tools))))
        problems.append(f"template render differs from chatformat.render at char {cut}: "
                        f"{text[max(0, cut - 20):cut + 20]!r}")
    if not traj.turn_token_ids:
        return problems
    tok = tokenize_conversation(tokenizer, traj.messages, traj.tools)
    spans = assistant_spans(tok["assistant_masks"])
    sampled = traj.turn_token_ids
    if len(spans) < len(sampled):
        return problems + [f"{len(sampled)} sampled turns but {len(spans)} assistant spans"]
    # Earlier assistant turns may be given history (not sampled): align on the last turns.
    for k, (ids, (a, b)) in enumerate(zip(sampled, spans[len(spans) - len(sampled):])):
        span = tok["input_ids"][a:b]
        if not _same_turn(list(ids), span, tokenizer.eos_token_id):
            problems.append(f"turn {k}: sampled {tokenizer.decode(ids)[:80]!r} ({len(ids)} ids) "
                            f"!= trained {tokenizer.decode(span)[:80]!r} ({len(span)} ids)")
    return problems


def check_consistency(trajectories, tokenizer, max_examples: int = 5) -> dict:
    """Counts for a round's stats: checked, mismatched turns / trajectories, bad ids, examples."""
    checked = mismatched_turns = render_mismatches = checked_bad = 0
    bad_ids, examples = [], []
    for traj in trajectories:
        problems = check_trajectory(traj, tokenizer)
        checked += bool(traj.turn_token_ids)
        if problems:
            mismatched_turns += sum(p.startswith("turn ") for p in problems)
            render_mismatches += any(p.startswith("template render") for p in problems)
            checked_bad += bool(traj.turn_token_ids)
            bad_ids.append(traj.id)
            if len(examples) < max_examples:
                examples.append({"id": traj.id, "problems": problems[:3]})
    return {"checked": checked, "mismatched_turns": mismatched_turns,
            "mismatched_trajectories": len(bad_ids), "render_mismatches": render_mismatches,
            "round_trips": render_mismatches == 0 and (checked == 0 or checked_bad < checked),
            "bad_ids": bad_ids, "examples": examples}
