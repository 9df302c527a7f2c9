"""Unit conversion: length, mass and volume factors, and temperature."""
from __future__ import annotations

import random

from .base import Domain, Example, N, S, ToolError, fmt_num, tool

FACTORS = {  # unit -> (category, value in the base unit)
    "m": ("length", 1.0), "km": ("length", 1000.0), "cm": ("length", 0.01),
    "ft": ("length", 0.3048), "in": ("length", 0.0254), "mi": ("length", 1609.344),
    "kg": ("mass", 1.0), "g": ("mass", 0.001), "lb": ("mass", 0.45359237), "oz": ("mass", 0.0283495),
    "l": ("volume", 1.0), "ml": ("volume", 0.001), "gal": ("volume", 3.78541),
}
ALIASES = {"meters": "m", "feet": "ft", "pounds": "lb", "miles": "mi", "kilograms": "kg"}


def _unit(u: str) -> tuple[str, float]:
    if u not in FACTORS:
        hint = f" Use the symbol {ALIASES[u]!r}." if u in ALIASES else ""
        raise ToolError("invalid_argument", f"unknown unit {u!r}.{hint}")
    return FACTORS[u]


def convert_units(value: float, from_unit: str, to_unit: str) -> dict:
    (ca, fa), (cb, fb) = _unit(from_unit), _unit(to_unit)
    if ca != cb:
        raise ToolError("invalid_argument", f"cannot convert {ca} to {cb}.")
    return {"value": round(value * fa / fb, 3), "unit": to_unit}


def list_units(category: str) -> dict:
    units = [u for u, (c, _) in FACTORS.items() if c == category]
    if not units:
        raise ToolError("not_found", "category must be length, mass or volume.")
    return {"category": category, "units": units}


TOOLS = [
    tool("convert_units", "Convert a value between units of one category (rounded to 3 places).",
         {"value": N, "from_unit": {**S, "description": "unit symbol, e.g. km"},
          "to_unit": {**S, "description": "unit symbol"}}),
    tool("list_units", "Unit symbols of a category (length, mass, volume).", {"category": S}),
]


def _pair(rng: random.Random) -> tuple[str, str]:
    cat = rng.choice(["length", "mass", "volume"])
    return tuple(rng.sample([u for u, (c, _) in FACTORS.items() if c == cat], 2))


def single(rng: random.Random) -> Example:
    a, b = _pair(rng)
    v = rng.choice([2, 3, 5, 7, 12, 20, 42, 100])
    out = convert_units(v, a, b)["value"]
    alias = next((x for x, u in ALIASES.items() if u == a), None)
    return Example(f"How many {b} is {v} {a}?", out,
                   [[("convert_units", {"value": v, "from_unit": a, "to_unit": b})]],
                   f"{v} {a} is {fmt_num(out)} {b}.", f"Convert {a} to {b}.",
                   ("convert_units", "from_unit", alias, a) if alias else None)


def parallel(rng: random.Random) -> Example:
    a, b = _pair(rng)
    x, y = rng.choice([1, 3, 8]), rng.choice([2, 5, 10])
    cx = convert_units(x, a, b)["value"]
    cy = convert_units(y, a, b)["value"]
    total = round(cx + cy, 3)
    return Example(f"Convert {x} {a} and {y} {a} to {b} and add the results.", total,
                   [[("convert_units", {"value": x, "from_unit": a, "to_unit": b}),
                     ("convert_units", {"value": y, "from_unit": a, "to_unit": b})]],
                   f"{fmt_num(cx)} + {fmt_num(cy)} = {fmt_num(total)} {b}.",
                   "Two conversions at once, then add.")


def chained(rng: random.Random) -> Example:
    cat = rng.choice(["length", "mass"])
    units = rng.sample([u for u, (c, _) in FACTORS.items() if c == cat], 3)
    v = rng.choice([4, 6, 15, 30])
    mid = convert_units(v, units[0], units[1])["value"]
    out = convert_units(mid, units[1], units[2])["value"]
    return Example(f"Convert {v} {units[0]} to {units[1]}, then convert that rounded result to "
                   f"{units[2]}. What do you get?", out,
                   [[("convert_units", {"value": v, "from_unit": units[0], "to_unit": units[1]})],
                    [("convert_units", {"value": mid, "from_unit": units[1],
                                        "to_unit": units[2]})]],
                   f"{v} {units[0]} is {fmt_num(mid)} {units[1]}, which is {fmt_num(out)} "
                   f"{units[2]}.", "Two conversions, the second on the first's result.")


DOMAIN = Domain("units", TOOLS, {"convert_units": convert_units, "list_units": list_units},
                {"single": single, "parallel": parallel, "chained": chained})
