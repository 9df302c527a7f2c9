"""Currency conversion over a fixed table of exchange rates."""
from __future__ import annotations

import random

from .base import Domain, Example, N, S, ToolError, fmt_num, tool

USD_PER = {"USD": 1.0, "EUR": 1.08, "GBP": 1.27, "JPY": 0.0067, "CHF": 1.12, "CAD": 0.73,
           "AUD": 0.66, "INR": 0.012, "CNY": 0.14, "MXN": 0.058}
ALIASES = {"dollars": "USD", "euros": "EUR", "pounds": "GBP", "yen": "JPY"}


def _code(code: str) -> str:
    if code not in USD_PER:
        hint = f" Use the ISO code {ALIASES[code]!r}." if code in ALIASES else \
            " Use a three-letter ISO code."
        raise ToolError("invalid_argument", f"currency {code!r} is not supported.{hint}")
    return code


def get_rate(base: str, quote: str) -> dict:
    return {"base": _code(base), "quote": _code(quote),
            "rate": round(USD_PER[base] / USD_PER[quote], 6)}


def convert(amount: float, source: str, target: str) -> dict:
    rate = get_rate(source, target)["rate"]
    return {"amount": round(amount * rate, 2), "currency": target}


TOOLS = [
    tool("get_rate", "Exchange rate: units of quote per one unit of base.",
         {"base": {**S, "description": "ISO code, e.g. USD"}, "quote": S}),
    tool("convert", "Convert an amount between currencies (rounded to cents).",
         {"amount": N, "source": {**S, "description": "ISO code"},
          "target": {**S, "description": "ISO code"}}),
]


def _amount(rng: random.Random) -> int:
    return rng.choice([20, 50, 75, 100, 120, 250, 400, 999, 1500])


def single(rng: random.Random) -> Example:
    src, dst = rng.sample(list(USD_PER), 2)
    amt = _amount(rng)
    out = convert(amt, src, dst)["amount"]
    alias = next((a for a, c in ALIASES.items() if c == src), None)
    return Example(f"Convert {amt} {src} to {dst}.", out,
                   [[("convert", {"amount": amt, "source": src, "target": dst})]],
                   f"{amt} {src} is {fmt_num(out)} {dst}.",
                   f"One conversion from {src} to {dst}.",
                   ("convert", "source", alias, src) if alias else None)


def parallel(rng: random.Random) -> Example:
    a, b, dst = rng.sample(list(USD_PER), 3)
    x, y = _amount(rng), _amount(rng)
    ca, cb = convert(x, a, dst)["amount"], convert(y, b, dst)["amount"]
    total = round(ca + cb, 2)
    return Example(f"What is {x} {a} plus {y} {b}, expressed in {dst}?", total,
                   [[("convert", {"amount": x, "source": a, "target": dst}),
                     ("convert", {"amount": y, "source": b, "target": dst})]],
                   f"{x} {a} is {fmt_num(ca)} {dst} and {y} {b} is {fmt_num(cb)} {dst}; "
                   f"together {fmt_num(total)} {dst}.",
                   "Two independent conversions, then add them.")


def chained(rng: random.Random) -> Example:
    hops = rng.randint(2, 4)
    path = rng.sample(list(USD_PER), hops + 1)
    amt = _amount(rng)
    steps, value = [], float(amt)
    for src, dst in zip(path, path[1:]):
        steps.append([("convert", {"amount": value, "source": src, "target": dst})])
        value = convert(value, src, dst)["amount"]
    route = " to ".join(path)
    return Example(f"Convert {amt} {path[0]} step by step along {route}, converting the "
                   f"rounded result of each step. What is the final amount in {path[-1]}?",
                   value, steps, f"The final amount is {fmt_num(value)} {path[-1]}.",
                   f"Convert along {route}, feeding each result into the next call.")


DOMAIN = Domain("currency", TOOLS, {"get_rate": get_rate, "convert": convert},
                {"single": single, "parallel": parallel, "chained": chained})
