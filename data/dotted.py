"""Objects named in a config by dotted path: `pkg.module` or `pkg.module:attr`.

Recipes and tool domains are both found this way; each caller checks what it got.
"""
from __future__ import annotations

import importlib
from typing import Any


def load(spec: str, what: str, unknown: str, default_attr: str | None = None) -> Any:
    """The module `spec` names (or its `default_attr`), or its `:attr`. Raises ValueError:
    `unknown` when a plain name (no dot, no colon) is no importable module, else a message
    naming `what`, the module and the attribute that could not be found."""
    module_name, _, attr = spec.partition(":")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as err:
        if "." not in spec and ":" not in spec:
            raise ValueError(unknown) from None
        raise ValueError(f"{what} {spec!r}: cannot import {module_name!r} ({err})") from None
    attr = attr or default_attr
    if attr:
        if not hasattr(obj, attr):
            raise ValueError(f"{what} {spec!r}: {module_name} has no {attr!r}")
        obj = getattr(obj, attr)
    return obj
