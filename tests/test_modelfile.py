"""Modelfile rendering and lint (Ollama itself cannot run here: its parser rules are in lint)."""
from __future__ import annotations

from pathlib import Path

import pytest

from data.chatformat import DEFAULT_SYSTEM, TOOLS_POSTAMBLE, TOOLS_PREAMBLE
from export import lint_modelfile, render_modelfile, write_modelfile
from export.lint import go_actions
from export.modelfile import GO_TEMPLATE


@pytest.fixture
def gguf(tmp_path) -> Path:
    path = tmp_path / "model-Q6_K.gguf"
    path.write_bytes(b"GGUF" + bytes(60))  # only the magic is checked
    return path


def test_rendered_modelfile_is_clean_and_complete(gguf):
    text = render_modelfile("./model-Q6_K.gguf", system="Be brief.", license_text="MIT")
    assert lint_modelfile(text, base_dir=gguf.parent) == []
    for line in ("FROM ./model-Q6_K.gguf", "PARAMETER temperature 0.6", "PARAMETER top_p 0.95",
                 "PARAMETER repeat_penalty 1.1", 'PARAMETER stop "<|im_end|>"',
                 'SYSTEM """Be brief."""', 'LICENSE """MIT"""'):
        assert line in text.splitlines()
    assert 'TEMPLATE """' + GO_TEMPLATE + '"""' in text
    assert "SYSTEM" not in render_modelfile("./model-Q6_K.gguf")


def test_write_modelfile_points_from_at_the_gguf_relative_to_itself(tmp_path, gguf):
    top = tmp_path / "repo" / "Modelfile"
    (tmp_path / "repo").mkdir()
    text = write_modelfile(top, gguf)
    assert "FROM ../model-Q6_K.gguf" in text
    assert lint_modelfile(top) == []


def test_go_template_follows_the_hf_template_structure():
    t = GO_TEMPLATE
    actions, error = go_actions(t)
    assert error is None
    heads = {a.split()[0] for a in actions if a}
    assert heads <= {"if", "else", "end", "range", "json", ".System", ".Content", ".Response",
                     ".Prompt", ".Function.Name", ".Function.Arguments", "$prev", "$last"}
    assert sum(a.split()[0] in ("if", "range") for a in actions) == \
        sum(a == "end" for a in actions)
    # the system turn: default system text and the exact tool preamble/postamble of the HF render
    assert "<|im_start|>system\n{{ if .System }}{{ .System }}{{ else }}" + DEFAULT_SYSTEM in t
    assert "{{- if .Tools }}" + TOOLS_PREAMBLE + "\n{{- range .Tools }}" in t
    assert "{{- end }}" + TOOLS_POSTAMBLE + "\n{{- end }}<|im_end|>\n" in t
    assert '{"type": "function", "function": {"name": {{ json .Function.Name }}' in t
    # user turns, assistant calls in canonical Hermes form, tool results merged into a user turn
    assert '{{- if eq .Role "user" }}<|im_start|>user\n{{ .Content }}<|im_end|>\n' in t
    assert ('{{- range .ToolCalls }}\n<tool_call>\n{"name": "{{ .Function.Name }}", '
            '"arguments": {{ .Function.Arguments }}}\n</tool_call>\n{{- end }}') in t
    assert '{{- if ne $prev "tool" }}<|im_start|>user{{ end }}\n<tool_response>\n' in t
    assert "{{ .Content }}\n</tool_response>" in t
    assert '{{- if and (ne .Role "assistant") $last }}<|im_start|>assistant\n{{ end }}' in t


BROKEN = [
    ("BADCOMMAND x", "line 2: unknown instruction 'BADCOMMAND'"),
    ("PARAMETER temprature 0.6", "unknown parameter 'temprature'"),
    ("PARAMETER top_k many", "top_k needs an integer, got 'many'"),
    ("PARAMETER temperature hot", "temperature needs a number, got 'hot'"),
    ("PARAMETER use_mmap maybe", "use_mmap needs true or false"),
    ("PARAMETER mirostat 1", "deprecated"),
    ("MESSAGE tool {}", "MESSAGE role 'tool' is not one of system, user, assistant"),
    ("FROM: ./x.gguf", "line 2: 'FROM:' is not an instruction"),
]


@pytest.mark.parametrize("line,message", BROKEN)
def test_lint_names_the_line_and_the_fix(gguf, line, message):
    text = render_modelfile("./model-Q6_K.gguf")
    lines = text.splitlines()
    broken = "\n".join(lines[:1] + [line] + lines[1:])
    problems = lint_modelfile(broken, base_dir=gguf.parent)
    assert any(message in p for p in problems), problems


def test_lint_catches_missing_file_template_without_tools_and_missing_stop(gguf):
    good = render_modelfile("./model-Q6_K.gguf")
    missing = lint_modelfile(good.replace("./model-Q6_K.gguf", "./model-Q9.gguf"),
                             base_dir=gguf.parent)
    assert len(missing) == 1 and "FROM ./model-Q9.gguf: no such file" in missing[0]
    no_tools = lint_modelfile(good.replace(".Tools", ".Extras"), base_dir=gguf.parent)
    assert any("never mentions .Tools" in p and "not supporting tools" in p for p in no_tools)
    no_stop = lint_modelfile(good.replace('PARAMETER stop "<|im_end|>"\n', ""),
                             base_dir=gguf.parent)
    assert no_stop == ['no PARAMETER stop "<|im_end|>": generation would run past the end of '
                       'the turn; add it']
    assert lint_modelfile("TEMPLATE x", base_dir=gguf.parent)[0].startswith("no FROM line")
    unclosed = lint_modelfile(good.replace('{{ end }}"""', '{{ end }}'), base_dir=gguf.parent)
    assert any('block of TEMPLATE closes only on line' in p and 'probably missing' in p
               for p in unclosed), unclosed
    never = lint_modelfile(good.replace('{{ end }}"""', '{{ end }}').replace('LICENSE """', ''),
                           base_dir=gguf.parent)
    assert any("block of TEMPLATE swallows the line 'PARAMETER temperature 0.6'" in p
               for p in never), never
    open_if = lint_modelfile(good.replace("{{ end }}<|im_start|>assistant\n{{ end }}{{ .Response",
                                          "<|im_start|>assistant\n{{ end }}{{ .Response"),
                             base_dir=gguf.parent)
    assert any("without {{ end }}" in p for p in open_if), open_if
    bad_action = lint_modelfile(good.replace("{{ .Content }}<|im_end|>", "{{ .Content <|im_end|>"),
                                base_dir=gguf.parent)
    assert any("characters Go cannot parse" in p for p in bad_action)
    not_gguf = gguf.parent / "weights.gguf"
    not_gguf.write_text("hello")
    assert "is not a GGUF file" in lint_modelfile(good.replace("./model-Q6_K.gguf",
                                                               "./weights.gguf"),
                                                  base_dir=gguf.parent)[0]


def test_system_with_triple_quotes_is_refused():
    with pytest.raises(ValueError, match='contains """'):
        render_modelfile("./m.gguf", system='say """hi"""')
