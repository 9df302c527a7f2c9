"""The export gate's load check: the GGUF must behave like the merged HF model it came from.

Both models run the same canary items (single-turn function calling and short multi-turn
chains, `split="canary", namespace="export"`) through the same rollout driver, parser and
verifier, greedily. Per item:
  agree   - same verification outcome AND the same first call (or both no call);
  markup  - when the HF model emits `<tool_call>`, the GGUF does too (quantization and the
            GGUF's tokenizer must not break the tool-call tags).
The check fails when markup is lost on more than half of the items where the HF model emitted
it (`MAX_MARKUP_LOST`), or agreement falls below `min_agreement`. A conversion that breaks the
tags loses them on every item; one lost item is quantization flipping a marginal decision
(measured: a round-1 model whose gate passed, q8_0 answered one single lookup without calling
where the float32 model called; the other item kept its call).
"""
from __future__ import annotations

import time
from pathlib import Path

from data.chatformat import CALL_OPEN, parse
from data.tasks import make
from data.trajectory import Task, Trajectory
from data.verify import first_call_metrics

KINDS = ("single", "chained")  # single-turn function calling, short multi-turn
MAX_MARKUP_LOST = 0.5   # share of the HF model's tool-call items the GGUF may answer without


def check_tasks(n: int) -> list[Task]:
    """`n` canary items alternating between the kinds (single first)."""
    return [make(KINDS[i % len(KINDS)], i // len(KINDS), split="canary", namespace="export")
            for i in range(n)]


def _first_call(traj: Trajectory) -> str | None:
    first = next((m for m in traj.messages if m["role"] == "assistant"), None)
    if first is None:
        return None
    turn = parse(first.get("content") or "", None)
    return turn.calls[0].key() if turn.calls else None


def _emits_markup(traj: Trajectory) -> bool:
    return any(CALL_OPEN in (m.get("content") or "") for m in traj.messages
               if m["role"] == "assistant")


def _first_turn(traj: Trajectory) -> str:
    return next((m.get("content") or "" for m in traj.messages if m["role"] == "assistant"), "")


def compare(tasks: list[Task], hf: list[Trajectory], gg: list[Trajectory],
            min_agreement: float) -> dict:
    """Item-by-item comparison of the two models' trajectories; pure, no models needed."""
    by_hf = {t.task_id: t for t in hf}
    by_gg = {t.task_id: t for t in gg}
    items, agree, lost, same_text = [], 0, 0, 0
    for task in tasks:
        h, g = by_hf[task.id], by_gg[task.id]
        same_outcome = h.success == g.success
        same_call = _first_call(h) == _first_call(g)
        h_markup, g_markup = _emits_markup(h), _emits_markup(g)
        ok = same_outcome and same_call
        agree += ok
        lost += h_markup and not g_markup
        same_text += _first_turn(h) == _first_turn(g)
        items.append({
            "task": task.id, "kind": task.kind, "agree": ok,
            "hf": {"success": h.success, "finish": h.finish, "first_call": _first_call(h),
                   "markup": h_markup, "exact": first_call_metrics(task, h.messages)["exact"],
                   "first_turn": _first_turn(h)[:300]},
            "gguf": {"success": g.success, "finish": g.finish, "first_call": _first_call(g),
                     "markup": g_markup, "exact": first_call_metrics(task, g.messages)["exact"],
                     "first_turn": _first_turn(g)[:300]},
        })
    n = len(tasks)
    agreement = agree / n if n else 1.0
    hf_markup = sum(map(_emits_markup, hf))
    reasons = []
    if lost > MAX_MARKUP_LOST * hf_markup:
        reasons.append(f"<tool_call> markup lost: the HF model emitted it and the GGUF did not "
                       f"on {lost} of its {hf_markup} tool-call items (more than "
                       f"{MAX_MARKUP_LOST:.0%}: the GGUF breaks the tags)")
    if agreement < min_agreement:
        reasons.append(f"agreement {agreement:.2f} is below the threshold {min_agreement:.2f} "
                       f"({agree} of {n} items reach the same outcome and first call)")
    return {
        "items": n, "agreement": round(agreement, 4), "min_agreement": min_agreement,
        "markup_lost": lost, "same_first_turn_text": same_text,
        "success": {"hf": sum(t.success for t in hf), "gguf": sum(t.success for t in gg)},
        "tool_call_items": {"hf": hf_markup,
                            "gguf": sum(map(_emits_markup, gg))},
        "passed": not reasons, "reasons": reasons, "per_item": items,
    }


def load_check(gguf: Path, model_dir: Path, *, items: int = 4, min_agreement: float = 0.75,
               max_tokens: int = 96, n_ctx: int = 4096, hf_dtype: str = "float32",
               make_backend=None) -> dict:
    """Run the canary items through the GGUF (llama.cpp) and the HF model (transformers),
    greedily, and compare them. Engines are closed before returning. `make_backend(kind,
    model, **options)` defaults to `engine.sampling.make_backend`."""
    from engine.rollout import rollout
    from engine.sampling import SamplingParams
    if make_backend is None:
        from engine.sampling import make_backend
    tasks = check_tasks(items)
    params = SamplingParams(temperature=0.0, top_p=1.0, max_tokens=max_tokens)
    runs, seconds = {}, {}
    for name, model, opts in (("gguf", gguf, {"n_ctx": n_ctx}),
                              ("hf", model_dir, {"dtype": hf_dtype})):
        start = time.perf_counter()
        backend = make_backend("llama_cpp" if name == "gguf" else "transformers", model, **opts)
        try:
            runs[name], _ = rollout(tasks, backend, k=1, params=params, progress=False,
                                    max_context_tokens=n_ctx)
        finally:
            backend.close()
        seconds[name] = round(time.perf_counter() - start, 2)
    report = compare(tasks, runs["hf"], runs["gguf"], min_agreement)
    report["seconds"] = seconds
    report["max_tokens"] = max_tokens
    return report
