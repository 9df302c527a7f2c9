"""Export settings (`export:`): quantization, the load check, the Modelfile's system prompt."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from engine.quants import QUANTS
from engine.settings import Strict


class ExportSettings(Strict):
    enabled: bool = Field(True, description="export every promoted model to GGUF")
    quant: Literal[tuple(QUANTS)] = Field("Q6_K", description="llama.cpp quantization of the "
                                                              "GGUF")
    load_check: bool = Field(True, description="play canary items through the GGUF (llama.cpp) "
                                               "and the merged HF model; fail when they disagree")
    check_items: int = Field(6, ge=1, description="canary items the load check plays")
    min_agreement: float = Field(0.5, ge=0.0, le=1.0,
                                 description="the load check fails below this share of items "
                                             "where the GGUF and the HF model agree")
    check_max_tokens: int = Field(96, ge=8, description="tokens per turn in the load check")
    system: str | None = Field(None, description="system prompt written into the Modelfile")
