"""Render the Ollama Modelfile for an exported GGUF.

Ollama never runs the GGUF's Jinja chat template (it only matches it against a list of
known ones, and a fine-tuned ChatML + tools template matches none), so the Modelfile must
carry a Go `TEMPLATE` that renders conversations the way `data/chat_template.jinja` does,
plus `PARAMETER stop "<|im_end|>"`.

What the Go template reproduces, rule by rule, from the HF template:
  - one system turn always: the system text (default "You are a helpful assistant."), then,
    when tools are given, the same tool preamble, one JSON line per tool and postamble;
  - user turns as ChatML;
  - assistant turns: "\\n" + content (when content, or no calls), then per call
    "\\n<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>";
  - consecutive tool results merged into ONE user turn of <tool_response> blocks;
  - "<|im_start|>assistant\\n" after a final user/tool message.
What cannot be byte-identical: Go prints JSON compactly (`{"city":"Paris"}` where the HF
template writes `{"city": "Paris"}`), both for tool parameters and call arguments, and Ollama
orders schema keys its own way. The tags, turn layout and tool text are the same.
"""
from __future__ import annotations

import os
from pathlib import Path

from data.chatformat import DEFAULT_SYSTEM

TOOL_LINE = ('{"type": "function", "function": {"name": {{ json .Function.Name }}, '
             '"description": {{ json .Function.Description }}, '
             '"parameters": {{ json .Function.Parameters }}}}')

GO_TEMPLATE = (
    '{{- $prev := "" }}{{- if .Messages }}<|im_start|>system\n'
    '{{ if .System }}{{ .System }}{{ else }}' + DEFAULT_SYSTEM + '{{ end }}\n'
    '{{- if .Tools }}\n'
    '\n'
    '# Tools\n'
    '\n'
    'You may call one or more functions to assist with the user query.\n'
    '\n'
    'You are provided with function signatures within <tools></tools> XML tags:\n'
    '<tools>\n'
    '{{- range .Tools }}\n'
    + TOOL_LINE + '\n'
    '{{- end }}\n'
    '</tools>\n'
    '\n'
    'For each function call, return a json object with function name and arguments within '
    '<tool_call></tool_call> XML tags:\n'
    '<tool_call>\n'
    '{"name": <function-name>, "arguments": <args-json-object>}\n'
    '</tool_call>\n'
    '{{- end }}<|im_end|>\n'
    '{{ range $i, $m := .Messages }}\n'
    '{{- $last := eq (len (slice $.Messages $i)) 1 }}\n'
    '{{- if eq .Role "user" }}<|im_start|>user\n'
    '{{ .Content }}<|im_end|>\n'
    '{{ else if eq .Role "assistant" }}<|im_start|>assistant\n'
    '{{- if or .Content (not .ToolCalls) }}\n'
    '{{ .Content }}\n'
    '{{- end }}\n'
    '{{- range .ToolCalls }}\n'
    '<tool_call>\n'
    '{"name": "{{ .Function.Name }}", "arguments": {{ .Function.Arguments }}}\n'
    '</tool_call>\n'
    '{{- end }}\n'
    '{{- if not $last }}<|im_end|>\n'
    '{{ end }}\n'
    '{{- else if eq .Role "tool" }}\n'
    '{{- if ne $prev "tool" }}<|im_start|>user{{ end }}\n'
    '<tool_response>\n'
    '{{ .Content }}\n'
    '</tool_response>\n'
    '{{- if $last }}<|im_end|>\n'
    '{{ else if ne (index (slice $.Messages $i) 1).Role "tool" }}<|im_end|>\n'
    '{{ end }}\n'
    '{{- end }}\n'
    '{{- if and (ne .Role "assistant") $last }}<|im_start|>assistant\n'
    '{{ end }}\n'
    '{{- $prev = .Role }}\n'
    '{{- end }}\n'
    '{{- else }}<|im_start|>system\n'
    '{{ if .System }}{{ .System }}{{ else }}' + DEFAULT_SYSTEM + '{{ end }}<|im_end|>\n'
    '{{ if .Prompt }}<|im_start|>user\n'
    '{{ .Prompt }}<|im_end|>\n'
    '{{ end }}<|im_start|>assistant\n'
    '{{ end }}{{ .Response }}{{ if .Response }}<|im_end|>{{ end }}'
)

PARAMETERS = [("temperature", "0.6"), ("top_p", "0.95"), ("repeat_penalty", "1.1"),
              ("num_ctx", "8192"), ("stop", '"<|im_end|>"'), ("stop", '"<|endoftext|>"')]
DEFAULT_LICENSE = ("Apache-2.0. Fine-tuned from SmolLM2-135M-Instruct (Apache-2.0) when the "
                   "run used the default model; otherwise the base model's license applies.")


def _block(name: str, text: str) -> str:
    if '"""' in text:
        raise ValueError(f'{name} text contains """, which a Modelfile cannot quote; remove it')
    return f'{name} """{text}"""'


def render_modelfile(gguf_from: str, system: str | None = None,
                     license_text: str | None = None, num_ctx: int = 8192) -> str:
    """The Modelfile text. `gguf_from` is written as given: use a path relative to where the
    Modelfile will live (`./model-Q6_K.gguf`) so the folder can be moved as a whole."""
    lines = ["# Tool-calling model exported by toolsmith (ChatML + Hermes tools).",
             "# Build it with: ollama create <name> -f Modelfile",
             f"FROM {gguf_from}", "", _block("TEMPLATE", GO_TEMPLATE), ""]
    for name, value in PARAMETERS:
        lines.append(f"PARAMETER {name} {num_ctx if name == 'num_ctx' else value}")
    if system:
        lines += ["", _block("SYSTEM", system)]
    lines += ["", _block("LICENSE", license_text or DEFAULT_LICENSE), ""]
    return "\n".join(lines)


def relative_from(modelfile: Path, gguf: Path) -> str:
    """The FROM value for `gguf` seen from the Modelfile's folder (`./x.gguf`, `./runs/...`)."""
    rel = os.path.relpath(Path(gguf).resolve(), Path(modelfile).resolve().parent)
    return rel if rel.startswith(".") else "./" + rel


def write_modelfile(path: Path, gguf: Path, system: str | None = None,
                    license_text: str | None = None) -> str:
    """Render a Modelfile for `gguf` with FROM relative to `path`, write it atomically."""
    from data.jsonl import write_text_atomic
    text = render_modelfile(relative_from(path, gguf), system, license_text)
    write_text_atomic(path, text)
    return text
