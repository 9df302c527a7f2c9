"""The GGUF quantizations the export can produce, defined once for config, CLI and export.

llama.cpp quantizes rows in blocks of 256 for the K-quants; a tensor whose row length is not
a multiple of 256 (SmolLM2's width is 576) falls back to another type, mostly q8_0. Each entry
records which tensor types count as "really" the requested quantization.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Quant:
    ftype: str                 # name of the llama_cpp LLAMA_FTYPE_* constant
    tensor_types: tuple        # GGUF tensor types that are this quantization (K_M mixes two)


QUANTS = {
    "Q6_K": Quant("LLAMA_FTYPE_MOSTLY_Q6_K", ("Q6_K",)),
    "Q8_0": Quant("LLAMA_FTYPE_MOSTLY_Q8_0", ("Q8_0",)),
    "Q5_K_M": Quant("LLAMA_FTYPE_MOSTLY_Q5_K_M", ("Q5_K", "Q6_K")),
    "Q4_K_M": Quant("LLAMA_FTYPE_MOSTLY_Q4_K_M", ("Q4_K", "Q6_K")),
}
