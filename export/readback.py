"""Read a GGUF back with the `gguf` library: tensor types, size, chat template, special tokens.

This is what the export report states about the shipped file, taken from the file itself
rather than from what we asked the quantizer for.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from .convert import gguf_library
from .quantize import check_quant

SPECIAL_IDS = ("bos", "eos", "unknown", "padding", "sep", "eot", "eom")
CHATML_TOKENS = ("<|im_start|>", "<|im_end|>")


def _value(reader, key: str):
    field = reader.fields.get(key)
    if field is None:
        return None
    try:
        return field.contents()
    except Exception:  # a field type this gguf version cannot decode: report, do not crash
        return f"<unreadable {key}>"


def read_gguf(path: Path) -> dict:
    """Everything the report needs from the file itself."""
    gguf = gguf_library()
    path = Path(path)
    reader = gguf.GGUFReader(str(path))
    types = Counter(t.tensor_type.name for t in reader.tensors)
    tokens = _value(reader, "tokenizer.ggml.tokens") or []
    special = {}
    for name in SPECIAL_IDS:
        idx = _value(reader, f"tokenizer.ggml.{name}_token_id")
        if isinstance(idx, int):
            special[name] = {"id": idx, "text": tokens[idx] if 0 <= idx < len(tokens) else None}
    chatml = {t: (tokens.index(t) if t in tokens else None) for t in CHATML_TOKENS}
    return {
        "path": path.name,
        "bytes": path.stat().st_size,
        "architecture": _value(reader, "general.architecture"),
        "name": _value(reader, "general.name"),
        "file_type": _value(reader, "general.file_type"),
        "tensors": len(reader.tensors),
        "tensor_types": dict(sorted(types.items(), key=lambda kv: -kv[1])),
        "chat_template": _value(reader, "tokenizer.chat_template"),
        "special_tokens": special,
        "chatml_token_ids": chatml,
        "add_bos_token": _value(reader, "tokenizer.ggml.add_bos_token"),
        "vocab_size": len(tokens),
    }


def quant_summary(info: dict, quant: str) -> dict:
    """How many tensors really are the requested type, and a sentence when most fell back.

    Norms and other 1-d tensors always stay F32; they are counted apart.
    """
    wanted = check_quant(quant).tensor_types
    types = info["tensor_types"]
    kept_f32 = types.get("F32", 0)
    quantizable = info["tensors"] - kept_f32
    really = sum(n for t, n in types.items() if t in wanted)
    fallback = {t: n for t, n in types.items() if t not in wanted and t != "F32"}
    summary = {"requested": quant, "really_requested_type": really,
               "quantizable_tensors": quantizable, "f32_tensors": kept_f32,
               "fallback": fallback, "note": ""}
    if quantizable and really * 2 < quantizable:
        main = max(fallback, key=fallback.get) if fallback else "another type"
        summary["note"] = (
            f"Only {really} of {quantizable} quantizable tensors are {quant}; llama.cpp fell "
            f"back to {main.lower()} on {fallback.get(main, 0)} of them because their row "
            f"length is not a multiple of 256 (the model's width). The file is effectively "
            f"{main.lower()}, not {quant}.")
    elif fallback:
        summary["note"] = (f"{really} of {quantizable} quantizable tensors are {quant}; "
                           f"{sum(fallback.values())} fell back to "
                           f"{', '.join(t.lower() for t in fallback)}.")
    return summary
