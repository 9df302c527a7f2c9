"""Export: HF -> f16 GGUF -> Q6_K (or Q8_0 / Q5_K_M / Q4_K_M), read-back report, load check
against the HF model, Ollama Modelfile + lint, and laptop chat through llama.cpp.

Heavy engines (torch, llama.cpp) are imported only inside the functions that use them.
"""
from .errors import ExportError
from .lint import lint_modelfile
from .modelfile import render_modelfile, write_modelfile
from .package import export_model
from .quantize import QUANTS

__all__ = ["ExportError", "QUANTS", "export_model", "lint_modelfile", "render_modelfile",
           "write_modelfile"]
