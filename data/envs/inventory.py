"""Inventory and orders: a product table, stock levels and order creation."""
from __future__ import annotations

import random

from .base import Domain, Example, I, S, ToolError, fmt_num, phrase, stable_int, tool

PRODUCTS = {f"SKU-{100 + i}": name for i, name in enumerate(
    ["desk lamp", "office chair", "standing desk", "monitor arm", "keyboard", "mouse",
     "webcam", "headset", "usb hub", "notebook", "stapler", "whiteboard", "printer",
     "paper ream", "desk fan", "footrest", "laptop stand", "cable tray", "label maker",
     "shredder", "bookshelf", "filing cabinet", "coat rack", "wall clock"])}
NAMES = {v: k for k, v in PRODUCTS.items()}
ALIASES = {"lamp": "desk lamp", "chair": "office chair", "hub": "usb hub"}


def price(sku: str) -> float:
    return round(5 + stable_int("price", sku, mod=2000) / 10, 2)


def search_products(query: str) -> dict:
    hits = [{"sku": s, "name": n, "price": price(s)} for s, n in PRODUCTS.items()
            if query.lower() == n]
    if not hits:
        hint = f" Try the full name {ALIASES[query]!r}." if query in ALIASES else ""
        raise ToolError("not_found", f"no product named {query!r}.{hint}")
    return {"results": hits}


def _sku(sku: str) -> str:
    if sku not in PRODUCTS:
        raise ToolError("not_found", f"unknown sku {sku!r}; search_products gives skus.")
    return sku


def get_stock(sku: str) -> dict:
    return {"sku": _sku(sku), "in_stock": stable_int("stock", sku, mod=40) + 3}


def create_order(sku: str, quantity: int) -> dict:
    stock = get_stock(sku)["in_stock"]
    if not 1 <= quantity <= stock:
        raise ToolError("invalid_argument", f"quantity must be 1..{stock} for {sku}.")
    return {"order_id": f"ORD-{stable_int('ord', sku, quantity, mod=900000) + 100000}",
            "total": round(price(sku) * quantity, 2)}


TOOLS = [
    tool("search_products", "Find products by exact name; returns sku and unit price.",
         {"query": S}),
    tool("get_stock", "Units in stock for a sku.", {"sku": S}),
    tool("create_order", "Order units of a sku; returns order id and total price.",
         {"sku": S, "quantity": I}),
]


def single(rng: random.Random) -> Example:
    name = rng.choice(list(NAMES))
    p = price(NAMES[name])
    alias = next((a for a, n in ALIASES.items() if n == name), None)
    ask = phrase(rng, ["What does one {n} cost?", "How much is a {n}?",
                       "What is the unit price of the {n}?", "Look up the price of one {n}.",
                       "I need the price of a single {n}.", "How much does the {n} cost?"],
                 n=name)
    return Example(ask, p, [[("search_products", {"query": name})]],
                   f"One {name} costs {fmt_num(p)}.", f"Search the catalogue for {name}.",
                   ("search_products", "query", alias, name) if alias else None)


def parallel(rng: random.Random) -> Example:
    a, b = rng.sample(list(NAMES), 2)
    sa, sb = get_stock(NAMES[a])["in_stock"], get_stock(NAMES[b])["in_stock"]
    return Example(f"How many units of {NAMES[a]} and {NAMES[b]} are in stock together?",
                   sa + sb, [[("get_stock", {"sku": NAMES[a]}), ("get_stock", {"sku": NAMES[b]})]],
                   f"{sa} + {sb} = {sa + sb} units.", "Query both stock levels and add them.")


def chained(rng: random.Random) -> Example:
    name = rng.choice(list(NAMES))
    sku = NAMES[name]
    stock = get_stock(sku)["in_stock"]
    qty = min(stock, rng.randint(2, 5))
    total = create_order(sku, qty)["total"]
    ask = phrase(rng, ["Order {q} units of the {n} if enough are in stock, and tell me the "
                       "order total.",
                       "If at least {q} of the {n} are in stock, order {q} and give me the total.",
                       "Please buy {q} units of the {n} when the stock allows; what is the total?"],
                 q=qty, n=name)
    return Example(ask, total,
                   [[("search_products", {"query": name})], [("get_stock", {"sku": sku})],
                    [("create_order", {"sku": sku, "quantity": qty})]],
                   f"Ordered {qty} x {name}; the total is {fmt_num(total)}.",
                   "Find the sku, check the stock, then place the order.")


DOMAIN = Domain("inventory", TOOLS, {"search_products": search_products, "get_stock": get_stock,
                                     "create_order": create_order},
                {"single": single, "parallel": parallel, "chained": chained})
