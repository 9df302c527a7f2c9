"""A Modelfile lint that follows Ollama's own parser and create-time checks.

Ollama cannot be installed on every machine the pipeline runs on, so the shipped Modelfile
is checked here: instruction names, PARAMETER names and value types (unknown names are hard
errors in Ollama), quoting, FROM pointing at a file that exists, MESSAGE roles, and a
TEMPLATE that can do tools (mentions .Tools and renders .ToolCalls as <tool_call>) with
balanced Go actions. Every message names the line and what to fix.
"""
from __future__ import annotations

import re
from pathlib import Path

INSTRUCTIONS = {"from", "parameter", "template", "system", "adapter", "license", "message",
                "renderer", "parser", "requires", "draft"}
INT = {"num_ctx", "num_batch", "num_gpu", "main_gpu", "num_thread", "num_keep", "seed",
       "num_predict", "top_k", "repeat_last_n", "draft_num_predict"}
FLOAT = {"top_p", "min_p", "typical_p", "temperature", "repeat_penalty", "presence_penalty",
         "frequency_penalty"}
BOOL = {"use_mmap"}
STRING = {"stop"}
DEPRECATED = {"penalize_newline", "low_vram", "f16_kv", "logits_all", "vocab_only",
              "use_mlock", "mirostat", "mirostat_tau", "mirostat_eta"}
ROLES = {"system", "user", "assistant"}
BOOLS = {"1", "t", "T", "true", "TRUE", "True", "0", "f", "F", "false", "FALSE", "False"}
_SWALLOWED = re.compile(r"(FROM|PARAMETER|TEMPLATE|SYSTEM|ADAPTER|LICENSE|MESSAGE) \S")
_WORD = re.compile(r"([A-Za-z]+)(?:[ \t]+|$)")


def _entries(text: str) -> tuple[list[tuple[int, str, str]], list[str]]:
    """(line, instruction, value) for each instruction; values may be multi-line quoted."""
    entries, problems = [], []
    lines = text.lstrip("\ufeff").split("\n")
    i = 0
    while i < len(lines):
        raw, lineno = lines[i].strip(), i + 1
        i += 1
        if not raw or raw.startswith("#"):
            continue
        m = _WORD.match(raw)
        if not m:
            word = raw.split()[0]
            problems.append(f"line {lineno}: {word!r} is not an instruction; use one of "
                            f"{', '.join(sorted(i.upper() for i in INSTRUCTIONS))}")
            continue
        word, value = m.group(1).lower(), raw[m.end():].strip()
        if value.startswith('"""'):
            body = value[3:]
            while '"""' not in body and i < len(lines):
                body += "\n" + lines[i]
                i += 1
            if '"""' not in body:
                problems.append(f'line {lineno}: {word.upper()} opens """ but never closes it; '
                                'add the closing """')
                continue
            body, rest = body.split('"""', 1)
            swallowed = [ln for ln in body.split("\n")[1:] if _SWALLOWED.match(ln)]
            if swallowed:
                problems.append(f'line {lineno}: the """ block of {word.upper()} swallows the '
                                f'line {swallowed[0][:40]!r}; its closing """ is probably missing')
            if rest.strip():
                problems.append(f'line {lineno}: the """ block of {word.upper()} closes only on '
                                f'line {i} with text after it; its own closing """ is probably '
                                'missing (or remove the text after it)')
            value = body
        elif value.startswith('"') and word != "parameter":
            if not (len(value) > 1 and value.endswith('"')):
                problems.append(f'line {lineno}: {word.upper()} value opens " but never closes '
                                'it; add the closing "')
                continue
            value = value[1:-1]
        entries.append((lineno, word, value))
    return entries, problems


def _parameter(lineno: int, value: str) -> list[str]:
    parts = value.split(None, 1)
    if len(parts) < 2:
        return [f"line {lineno}: PARAMETER needs a name and a value, e.g. "
                "'PARAMETER temperature 0.6'"]
    name, arg = parts[0], parts[1].strip()
    if not re.fullmatch(r"[A-Za-z0-9_]+", name):
        return [f"line {lineno}: parameter name {name!r} may only hold letters, digits and _"]
    if name in DEPRECATED:
        return [f"line {lineno}: parameter {name!r} is deprecated and ignored by Ollama; "
                "remove it"]
    if arg.startswith('"'):
        if len(arg) < 2 or not arg.endswith('"'):
            return [f'line {lineno}: value of {name} opens " but never closes it']
        arg = arg[1:-1]
    if name in INT:
        if not re.fullmatch(r"[+-]?\d+", arg):
            return [f"line {lineno}: {name} needs an integer, got {arg!r}"]
    elif name in FLOAT:
        try:
            float(arg)
        except ValueError:
            return [f"line {lineno}: {name} needs a number, got {arg!r}"]
    elif name in BOOL:
        if arg not in BOOLS:
            return [f"line {lineno}: {name} needs true or false, got {arg!r}"]
    elif name not in STRING:
        known = sorted(INT | FLOAT | BOOL | STRING)
        return [f"line {lineno}: unknown parameter {name!r} (Ollama refuses the file); "
                f"use one of {', '.join(known)}"]
    elif not arg:
        return [f"line {lineno}: stop needs a non-empty string"]
    return []


def go_actions(template: str) -> tuple[list[str], str | None]:
    """The actions of a Go template, split the way Go's lexer does: an action runs from
    `{{` to the first `}}` outside a quoted string (so `{{ .X }}}` is an action and a "}").
    Returns (actions with trim markers removed, error or None)."""
    actions, i = [], 0
    while True:
        start = template.find("{{", i)
        if start < 0:
            return actions, None
        j, quote = start + 2, None
        while j < len(template):
            c = template[j]
            if quote:
                if c == "\\" and quote == '"':
                    j += 1
                elif c == quote:
                    quote = None
            elif c in "\"`'":
                quote = c
            elif template.startswith("}}", j):
                break
            j += 1
        else:
            line = template.count("\n", 0, start) + 1
            return actions, (f"an action opened with '{{{{' on its line {line} never closes; "
                             "add '}}'")
        body = template[start + 2:j].strip()
        body = body[1:] if body.startswith("-") else body
        body = body[:-1] if body.endswith("-") else body
        actions.append(body.strip())
        i = j + 2


def lint_template(lineno: int, template: str) -> list[str]:
    """Go template checks that matter for a tool-calling model."""
    problems = []
    actions, error = go_actions(template)
    if error:
        problems.append(f"line {lineno}: TEMPLATE: {error}")
    for action in actions:
        bare = re.sub(r'"(?:\\.|[^"\\])*"|`[^`]*`|'"'[^']*'", "", action)
        if not bare.startswith("/*") and re.search(r"[^\w\s.$()|:=,+\-]", bare):
            problems.append(f"line {lineno}: TEMPLATE action {{{{ {action[:40]} }}}} holds "
                            "characters Go cannot parse; close the action with }} where it ends")
    depth = 0
    for action in actions:
        words = action.split()
        head = words[0] if words else ""
        if head in ("if", "range", "with", "block", "define"):
            depth += 1
        elif head == "end":
            depth -= 1
            if depth < 0:
                problems.append(f"line {lineno}: TEMPLATE has an {{{{ end }}}} without an "
                                "open if/range/with")
                depth = 0
    if depth > 0:
        problems.append(f"line {lineno}: TEMPLATE leaves {depth} if/range/with block(s) "
                        "without {{ end }}")
    needs = [(".Tools", "it never mentions .Tools, so Ollama marks the model as not "
                        "supporting tools; render the tool list from .Tools"),
             (".ToolCalls", "it never renders .ToolCalls, so earlier calls vanish from the "
                            "prompt; render each call inside <tool_call></tool_call>"),
             ("<tool_call>", "it has no <tool_call> tag, so Ollama cannot find calls in the "
                             "output; wrap calls in <tool_call></tool_call>"),
             ("<tool_response>", "it has no <tool_response> wrapper for tool results; render "
                                 "role 'tool' messages inside <tool_response></tool_response>"),
             ("<|im_start|>", "it has no ChatML <|im_start|> turns; the model was trained on "
                              "ChatML"),
             (".Messages", "it never uses .Messages, so chat history is lost")]
    for needle, why in needs:
        if needle not in template:
            problems.append(f"line {lineno}: TEMPLATE: {why}")
    return problems


def lint_modelfile(path_or_text: str | Path, base_dir: str | Path | None = None) -> list[str]:
    """Problems with a Modelfile (empty when clean). A Path, or a str naming an existing file,
    is read; other strings are the Modelfile text. FROM paths resolve against `base_dir`, by
    default the Modelfile's folder (or the working directory for text)."""
    if isinstance(path_or_text, Path) or ("\n" not in path_or_text
                                          and Path(path_or_text).is_file()):
        path = Path(path_or_text)
        if not path.is_file():
            return [f"{path}: no such Modelfile"]
        text = path.read_text(encoding="utf-8")
        base = Path(base_dir) if base_dir else path.parent
    else:
        text, base = path_or_text, Path(base_dir) if base_dir else Path.cwd()
    entries, problems = _entries(text)
    froms = [e for e in entries if e[1] == "from"]
    if not froms:
        problems.append("no FROM line; add 'FROM ./model-Q6_K.gguf' (the exported GGUF)")
    stops, template = [], None
    for lineno, word, value in entries:
        if word not in INSTRUCTIONS:
            problems.append(f"line {lineno}: unknown instruction {word.upper()!r}; use one of "
                            f"{', '.join(sorted(i.upper() for i in INSTRUCTIONS))}")
        elif word == "from":
            problems += _from(lineno, value, base)
        elif word == "parameter":
            problems += _parameter(lineno, value)
            parts = value.split(None, 1)
            if parts and parts[0] == "stop" and len(parts) == 2:
                stops.append(parts[1].strip().strip('"'))
        elif word == "template":
            template = (lineno, value)
        elif word == "message":
            role = value.split(None, 1)[0].lower() if value else ""
            if role not in ROLES:
                problems.append(f"line {lineno}: MESSAGE role {role!r} is not one of system, "
                                "user, assistant (Ollama has no tool role here)")
        elif word == "requires" and not re.fullmatch(r"v?\d+\.\d+\.\d+", value):
            problems.append(f"line {lineno}: REQUIRES needs a version like 0.14.0")
        elif word in ("system", "license", "adapter", "renderer", "parser", "draft") \
                and not value.strip():
            problems.append(f"line {lineno}: {word.upper()} has no value")
    if template is None:
        problems.append("no TEMPLATE: Ollama does not run the GGUF's chat template, so the "
                        "model would get a bare prompt and no tools; add the ChatML TEMPLATE")
    else:
        problems += lint_template(*template)
    if "<|im_end|>" not in stops:
        problems.append("no PARAMETER stop \"<|im_end|>\": generation would run past the end "
                        "of the turn; add it")
    return problems


def _from(lineno: int, value: str, base: Path) -> list[str]:
    if not value:
        return [f"line {lineno}: FROM has no value; give the GGUF path"]
    looks_like_path = value.startswith((".", "/", "~")) or value.endswith(".gguf")
    if not looks_like_path:
        return []  # a model name (e.g. a library model); Ollama resolves it at create time
    path = Path(value).expanduser()
    path = path if path.is_absolute() else base / path
    if not path.exists():
        return [f"line {lineno}: FROM {value}: no such file (looked at {path}); export the "
                "model first or fix the path"]
    if path.is_file():
        with open(path, "rb") as f:
            if f.read(4) != b"GGUF":
                return [f"line {lineno}: FROM {value} is not a GGUF file"]
    return []
