"""AST-style checking of function calls against BFCL-style possible answers.

A possible answer lists, per expected call, each parameter's acceptable values:
`{"spotify.play": {"artist": ["Taylor Swift"], "duration": [20], "shuffle": ["", False]}}`
(`""` among them means the parameter may be left out). The rules follow BFCL's checker:
  - the number of calls equals the number of expected calls; with several, order is free and
    each expected call greedily takes the first unmatched call that passes;
  - the name is equal; every `required` parameter of the function doc is present;
  - every passed parameter exists in the doc and in the possible answer;
  - types follow the doc, with int -> float coercion (a JSON 5 where a float is declared);
    an undeclared type is BFCL's "any", i.e. a string;
    a value whose type equals the first accepted value's type is compared by equality only,
    and so is every value when the first accepted value's type differs from the doc's
    (BFCL's "variable");
  - list elements are type-checked against the doc's `items` type, or the type of the first
    element of an accepted list; a non-list accepted value (such as `""`) waives the check;
  - strings compare after deleting spaces and `,./-_*^`, lower-casing, `'` -> `"`;
    lists compare element-wise in order (`""` accepted also accepts `[]`); dicts key by key
    against the accepted values;
  - an expected parameter may be absent only when `""` is among its accepted values.
`tests/test_bfcl_ast_agreement.py` runs this checker and BFCL's own `ast_checker` over every
shipped single-turn item (gold and perturbed answers) and requires the same verdicts.
Calls are plain dicts or `Call`s with `name` and `arguments`. Never raises on model output.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_PY_TYPES = {"string": str, "integer": int, "float": float, "number": float, "boolean": bool,
             "array": list, "tuple": list, "dict": dict, "object": dict, "any": str}
_STRIP = re.compile(r"[ ,./\-_*^]")
_NONE = object()  # "no accepted value" (None itself can be an accepted value)


@dataclass
class AstResult:
    valid: bool
    errors: list[str] = field(default_factory=list)


def normalise(s: str) -> str:
    return _STRIP.sub("", s).lower().replace("'", '"')


def _doc(functions: list[dict], name: str) -> dict | None:
    for f in functions:
        f = f.get("function", f)
        if f.get("name") == name:
            return f
    return None


def _type_ok(value: Any, want: type) -> tuple[bool, Any]:
    """Exact type match (bool is not an int), int coerced to float. Returns (ok, value)."""
    if want is float and type(value) is int:
        return True, float(value)
    return type(value) is want, value


def _norm(v: Any) -> Any:
    return normalise(v) if isinstance(v, str) else v


def _dict_ok(value: dict, accepted: list) -> bool:
    for cand in accepted:
        if cand == "" or not isinstance(cand, dict):
            continue
        if all(k in cand and _norm(v) in [_norm(a) for a in cand[k]] for k, v in value.items()) \
                and all("" in cand[k] for k in cand if k not in value):
            return True
    return False


def _as_list(c: Any) -> Any:
    return [] if c == "" else c  # BFCL compares lengths and elements: "" reads as []


def _value_ok(value: Any, accepted: list, spec: dict) -> bool:
    if isinstance(value, str):
        return normalise(value) in [normalise(a) for a in accepted if isinstance(a, str)]
    if isinstance(value, list):
        cands = [_as_list(c) for c in accepted]
        if spec.get("items", {}).get("type") in ("dict", "object"):
            return any(isinstance(c, list) and len(c) == len(value)
                       and all(isinstance(v, dict) and _dict_ok(v, [d]) for v, d in zip(value, c))
                       for c in cands)
        return any(isinstance(c, list) and [_norm(x) for x in value] == [_norm(x) for x in c]
                   for c in cands)
    if isinstance(value, dict):
        return _dict_ok(value, accepted)
    return value in accepted


def _items_ok(value: list, accepted: list, spec: dict) -> bool:
    """BFCL's one-level element check: some accepted value is not a list (the check is
    waived), or every element has the `items` type or the type of that list's first
    element (no int -> float coercion inside lists)."""
    item_type = _PY_TYPES.get(spec.get("items", {}).get("type", "any"))
    if item_type is None:
        return True
    for cand in accepted:
        if not isinstance(cand, list):
            return True
        first = next((a for a in cand if a != ""), _NONE)
        if all(type(v) is item_type or (first is not _NONE and type(v) is type(first))
               for v in value):
            return True
    return False


def check_call(call: Any, expected: dict, functions: list[dict],
               check_name: bool = True) -> list[str]:
    """Errors of one call against one expected call `{name: {param: [accepted...]}}`."""
    (gt_name, gt_params), = expected.items()
    name = getattr(call, "name", None) if not isinstance(call, dict) else call.get("name")
    args = getattr(call, "arguments", None) if not isinstance(call, dict) else call.get("arguments")
    if check_name and name != gt_name:
        return [f"wrong name: {name!r}, expected {gt_name!r}"]
    if not isinstance(args, dict):
        return [f"arguments of {name!r} are not an object"]
    doc = _doc(functions, gt_name)
    if doc is None:
        return [f"no function doc for {gt_name!r}"]
    params = doc.get("parameters", {})
    props = params.get("properties", {})
    for req in params.get("required", []):
        if req not in args:
            return [f"missing required parameter {req!r} of {gt_name}"]
    for key, value in args.items():
        if key not in props or key not in gt_params:
            return [f"unexpected parameter {key!r} for {gt_name}"]
        spec, accepted = props[key], list(gt_params[key])
        want = _PY_TYPES.get(spec.get("type", "any"))
        first = next((a for a in accepted if a != ""), _NONE)
        variable = first is not _NONE and type(first) is not want
        if want is not None:
            ok, value = _type_ok(value, want)
            if not ok:
                if first is not _NONE and type(value) is type(first):
                    if value not in accepted:  # a "variable": equality only
                        return [f"{gt_name}.{key}: {value!r} is not one of {accepted!r}"]
                    continue
                return [f"{gt_name}.{key}: type {type(value).__name__}, expected "
                        f"{spec.get('type')}"]
            if want is list and not _items_ok(value, accepted, spec):
                return [f"{gt_name}.{key}: an element is not {spec['items'].get('type')}"]
            if variable:  # the accepted values are not of the doc's type: equality only
                if value not in accepted:
                    return [f"{gt_name}.{key}: {value!r} is not one of {accepted!r}"]
                continue
        if not _value_ok(value, accepted, spec):
            return [f"{gt_name}.{key}: {value!r} is not one of {accepted!r}"]
    for key, accepted in gt_params.items():
        if key not in args and "" not in accepted:
            return [f"missing parameter {key!r} of {gt_name} (not optional)"]
    return []


def check(calls: list, ground_truth: list[dict], functions: list[dict],
          check_name: bool = True) -> AstResult:
    """Check a turn's calls against the possible answer (one entry per expected call)."""
    if len(calls) != len(ground_truth):
        return AstResult(False, [f"wrong number of calls: {len(calls)}, expected "
                                 f"{len(ground_truth)}"])
    if len(ground_truth) == 1:
        errors = check_call(calls[0], ground_truth[0], functions, check_name)
        return AstResult(not errors, errors)
    used: set[int] = set()
    for expected in ground_truth:  # order free; greedy, as BFCL does
        match = next((i for i, c in enumerate(calls) if i not in used
                      and not check_call(c, expected, functions, check_name)), None)
        if match is None:
            return AstResult(False, [f"no call matches expected {next(iter(expected))!r}"])
        used.add(match)
    return AstResult(True, [])


def _concrete(value: Any) -> Any:
    """A GT dict value holds accepted lists per key: take the first non-omittable of each."""
    if isinstance(value, dict) and all(isinstance(v, list) for v in value.values()):
        out = {}
        for k, accepted in value.items():
            pick = next((a for a in accepted if a != ""), _NONE)
            if pick is not _NONE:
                out[k] = _concrete(pick)
        return out
    if isinstance(value, list):
        return [_concrete(v) if isinstance(v, dict) else v for v in value]
    return value


def first_accepted(ground_truth: list[dict],
                   functions: list[dict] = ()) -> list[tuple[str, dict]]:
    """One concrete correct answer, the minimal one: omittable parameters that the doc does not
    require are left out, the others take their first accepted value."""
    out = []
    for expected in ground_truth:
        (name, params), = expected.items()
        doc = _doc(list(functions), name) or {}
        required = set(doc.get("parameters", {}).get("required", []))
        args = {}
        for key, accepted in params.items():
            if "" in accepted and key not in required:
                continue
            value = next((a for a in accepted if a != ""), _NONE)
            if value is not _NONE:
                args[key] = _concrete(value)
        out.append((name, args))
    return out
