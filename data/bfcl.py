"""BFCL v4 as the project reads it: entries from the installed `bfcl-eval` package, its tool
docs as OpenAI-form declarations, and its executable multi-turn classes behind the project's
`Environment` protocol (evaluation only; nothing here is training data).

Data is read from the package (`importlib.resources`), never from a copy in the repository.
BFCL runs a call by `eval`-ing a string like `"cd(folder='docs')"`, so the only strings that
reach it are built here from parsed JSON (`call_string`): a name that is one of the entry's
offered functions, argument names that function declares, values written with `repr` (JSON
values only, so every value is a literal), and the result parsed back to make sure of it.

BFCL keeps the instances of an entry in module globals named after (model name, entry id).
Every environment gets its own tag as that "model name" and deletes the globals with that tag
when it closes (`release`), so k samples of one entry never share state and memory stays flat.
"""
from __future__ import annotations

import ast
import copy
import importlib.resources
import json
import keyword
import math
import os
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .chatformat import Call
from .environment import ToolResult
from .envs import ToolError
from .loaders import BfclItem, load_bfcl

# BFCL creates result/score folders under its project root when some modules are imported;
# keep them out of site-packages
os.environ.setdefault("BFCL_PROJECT_ROOT", str(Path(tempfile.gettempdir()) / "toolsmith-bfcl"))

SINGLE_TURN = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance",
               "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
               "live_irrelevance")
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
              "multi_turn_long_context")
CATEGORIES = SINGLE_TURN + MULTI_TURN
STEP_LIMIT = 20  # BFCL's MAXIMUM_STEP_LIMIT: model steps with calls allowed per user turn
# BFCL's DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC, sent at a held-out turn of miss_func
ADDED_FUNCTIONS_PROMPT = ("I have updated some more functions you can choose from. "
                          "What about now?")


def data_dir() -> Path:
    """The `data/` folder of the installed bfcl-eval package."""
    try:
        root = importlib.resources.files("bfcl_eval") / "data"
    except ModuleNotFoundError:
        raise FileNotFoundError("bfcl-eval is not installed; run `pip install --no-deps "
                                "bfcl-eval` (see .ci/setup)") from None
    path = Path(str(root))
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: bfcl-eval ships no data folder; reinstall it")
    return path


def version() -> str:
    from importlib.metadata import version as v
    return v("bfcl-eval")


def _check_category(category: str, allowed: tuple[str, ...]) -> None:
    if category not in allowed:
        raise ValueError(f"unknown BFCL category {category!r}; choose from {', '.join(allowed)}")


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def question_file(category: str) -> Path:
    return data_dir() / f"BFCL_v4_{category}.json"


def user_messages(category: str) -> list[str]:
    """Every user message of a category's entries, read from its question file alone (no
    possible answers, no function docs): what decontamination needs, in a fifth of the time
    the full loaders take."""
    _check_category(category, CATEGORIES)
    return [m["content"] for row in _lines(question_file(category)) for turn in row["question"]
            for m in turn if m.get("role") == "user" and m.get("content")]


def load_single(category: str) -> list[BfclItem]:
    """Every item of a single-turn category (possible answers attached; none for
    irrelevance)."""
    _check_category(category, SINGLE_TURN)
    return load_bfcl(question_file(category))


# -------------------------------------------------------------------------- multi-turn data

@dataclass
class MultiTurnEntry:
    """One multi-turn entry with its function docs resolved the way BFCL's runner does."""
    id: str
    category: str
    turns: list[list[dict]]          # per user turn, its messages ([] for a held-out turn)
    functions: list[dict]            # BFCL docs offered from the first turn
    held_out: dict[int, list[dict]]  # turn index -> docs first offered at that turn
    initial_config: dict
    involved_classes: list[str]
    ground_truth: list[list[str]]    # per turn, BFCL's call strings

    @property
    def long_context(self) -> bool:
        return "long_context" in self.category

    def checker_entry(self) -> dict:
        """The fields BFCL's multi-turn checker reads."""
        return {"id": self.id, "initial_config": self.initial_config,
                "involved_classes": list(self.involved_classes)}

    def all_functions(self) -> list[dict]:
        return self.functions + [d for docs in self.held_out.values() for d in docs]


def _class_docs(class_name: str) -> list[dict]:
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING
    return _lines(data_dir() / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name])


def load_multi_turn(category: str) -> list[MultiTurnEntry]:
    """Every entry of a multi-turn category with its ground truth."""
    _check_category(category, MULTI_TURN)
    answers = {r["id"]: r["ground_truth"]
               for r in _lines(data_dir() / "possible_answer" / f"BFCL_v4_{category}.json")}
    docs_cache: dict[str, list[dict]] = {}
    out = []
    for row in _lines(question_file(category)):
        docs = []
        for cls in row["involved_classes"]:
            if cls not in docs_cache:
                docs_cache[cls] = _class_docs(cls)
            docs += copy.deepcopy(docs_cache[cls])
        held: dict[int, list[dict]] = {}
        for turn, names in (row.get("missed_function") or {}).items():
            held[int(turn)] = [d for d in docs if d["name"] in names]
            docs = [d for d in docs if d["name"] not in names]
        out.append(MultiTurnEntry(row["id"], category, row["question"], docs, held,
                                  row["initial_config"], row["involved_classes"],
                                  answers[row["id"]]))
    return out


# ---------------------------------------------------------------------- tool declarations

def _openapi(spec: Any) -> Any:
    """BFCL parameter types -> JSON-Schema types through BFCL's own GORILLA_TO_OPENAPI
    (unknown types become string, as BFCL's converter does)."""
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    if not isinstance(spec, dict):
        return spec
    out = {k: v for k, v in spec.items() if k not in ("properties", "items")}
    if "type" in spec:
        out["type"] = GORILLA_TO_OPENAPI.get(spec["type"], "string")
    if isinstance(spec.get("properties"), dict):
        out["properties"] = {k: _openapi(v) for k, v in spec["properties"].items()}
    if isinstance(spec.get("items"), dict):
        out["items"] = _openapi(spec["items"])
    return out


def tools_of(docs: list[dict]) -> list[dict]:
    """BFCL function docs -> the project's OpenAI-form tool declarations. The docs'
    `response` blocks are left out: they describe outputs and cost context."""
    tools = []
    for d in docs:
        params = _openapi(d.get("parameters") or {"type": "dict", "properties": {}})
        params["type"] = "object"
        tools.append({"type": "function", "function": {
            "name": d["name"], "description": d.get("description", ""), "parameters": params}})
    return tools


# ----------------------------------------------------------------------- call strings

def _literal_ok(value: Any, depth: int = 0) -> bool:
    """JSON values only (what `json.loads` gives), finite numbers, bounded nesting."""
    if depth > 32:
        return False
    if value is None or isinstance(value, (bool, str, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_literal_ok(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _literal_ok(v, depth + 1) for k, v in value.items())
    return False


def _identifier(name: Any) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def call_string(name: str, arguments: dict, docs: list[dict]) -> str:
    """The string BFCL executes for one parsed call: `name(k=repr(v), ...)`.

    Raises ValueError unless `name` is one of `docs` (the functions offered so far), every
    argument name is a parameter that function declares, and every value is a JSON value.
    The string is parsed back and must be exactly that call with literal arguments."""
    doc = next((d for d in docs if d["name"] == name), None)
    if doc is None or not _identifier(name):
        raise ValueError(f"{name!r} is not one of the functions offered")
    if not isinstance(arguments, dict):
        raise ValueError(f"arguments of {name} are not an object")
    declared = (doc.get("parameters") or {}).get("properties") or {}
    for key, value in arguments.items():
        if key not in declared or not _identifier(key):
            raise ValueError(f"{name} has no parameter {key!r}")
        if not _literal_ok(value):
            raise ValueError(f"{name}.{key}: not a JSON value")
    text = f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"
    node = ast.parse(text, mode="eval").body
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == name and not node.args
            and [kw.arg for kw in node.keywords] == list(arguments)
            and all(ast.literal_eval(kw.value) == arguments[kw.arg] for kw in node.keywords)):
        raise ValueError(f"call to {name} does not read back as itself")  # never expected
    return text


def parse_call_string(text: str, docs: list[dict]) -> tuple[str, dict]:
    """A ground-truth string like `sort('a.pdf')` -> (name, {param: value}); positional
    arguments take the doc's parameter order. Literals only (`ast.literal_eval`)."""
    node = ast.parse(text, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"{text!r} is not a plain function call")
    name = node.func.id
    doc = next((d for d in docs if d["name"] == name), None)
    if doc is None:
        raise ValueError(f"{text!r}: no function doc for {name!r}")
    order = list((doc.get("parameters") or {}).get("properties") or {})
    args = {order[i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
    args.update({kw.arg: ast.literal_eval(kw.value) for kw in node.keywords})
    return name, args


# ------------------------------------------------------------------------- environment

def new_tag() -> str:
    """A unique instance tag (the "model name" under which BFCL keeps instances)."""
    return f"tsm{uuid.uuid4().hex}"


def release(tag: str) -> int:
    """Delete BFCL's module globals holding instances created under `tag` (the checker's
    `_eval` and `_ground_truth` copies included). Returns how many were deleted."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    g = vars(multi_turn_utils)
    doomed = [n for n in g if n.startswith(tag + "_") and n.endswith("_instance")]
    for n in doomed:
        del g[n]
    return len(doomed)


def live_instances(tag: str = "") -> int:
    """How many BFCL instances are held now (under `tag`, or in total)."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    return sum(n.startswith(tag) and n.endswith("_instance") for n in vars(multi_turn_utils))


def _error_of(result: str) -> ToolError | None:
    """BFCL reports failures as text: an exception, or a dict with an "error" key."""
    if result.startswith("Error during execution:"):
        return ToolError("execution_error", result.split(":", 1)[1].strip())
    if result.startswith("{"):
        try:
            body = json.loads(result)
        except json.JSONDecodeError:
            return None
        if isinstance(body, dict) and set(body) == {"error"}:
            return ToolError("tool_error", str(body["error"]))
    return None


class BfclEnvironment:
    """An entry's BFCL classes, instantiated from its `initial_config` under a fresh tag.

    `tools` are the functions offered so far (`offer` adds held-out ones at their turn);
    `calls` are the strings executed, in order: exactly what BFCL's checker replays."""

    def __init__(self, entry: MultiTurnEntry, tag: str | None = None):
        self.entry = entry
        self.tag = tag or new_tag()
        self.docs = list(entry.functions)
        self.tools = tools_of(self.docs)
        self.calls: list[str] = []
        self._instances: dict = self._run([])[1]

    def _run(self, strings: list[str]) -> tuple[list[str], dict]:
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import \
            execute_multi_turn_func_call
        return execute_multi_turn_func_call(
            strings, self.entry.initial_config, self.entry.involved_classes, self.tag,
            self.entry.id, long_context=self.entry.long_context)

    def offer(self, docs: list[dict]) -> None:
        """Make more functions callable (BFCL's miss_func turns)."""
        self.docs += [d for d in docs if d not in self.docs]
        self.tools = tools_of(self.docs)

    def execute(self, call: Call) -> ToolResult:
        try:
            text = call_string(call.name, call.arguments, self.docs)
        except ValueError as err:
            return ToolResult(error=ToolError("invalid_call", str(err)))
        results, self._instances = self._run([text])
        self.calls.append(text)
        err = _error_of(results[0])
        return ToolResult(error=err) if err else ToolResult(value=results[0])

    def state(self) -> dict:
        """Executed call strings and each instance's public attributes (what BFCL's state
        check compares)."""
        return {"calls": list(self.calls),
                "classes": {name: {k: v for k, v in vars(obj).items() if not k.startswith("_")}
                            for name, obj in self._instances.items()}}

    def close(self) -> None:
        self._instances = {}
        release(self.tag)
