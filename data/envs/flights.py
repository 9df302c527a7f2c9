"""Flights: search by route and date, details and booking, over a mock timetable."""
from __future__ import annotations

import random

from .base import Domain, Example, S, ToolError, stable_int, tool

AIRPORTS = ["CDG", "HND", "JFK", "LHR", "BER", "MAD", "FCO", "SYD", "YYZ", "DUB"]
DATES = [f"2026-04-{d:02d}" for d in range(1, 29)]


def _check(origin: str, destination: str, date: str) -> None:
    for code in (origin, destination):
        if code not in AIRPORTS:
            raise ToolError("not_found", f"airport {code!r} not served; use IATA codes.")
    if date not in DATES:
        raise ToolError("invalid_argument", f"date {date!r} outside {DATES[0]}..{DATES[-1]}.")


def search_flights(origin: str, destination: str, date: str) -> dict:
    _check(origin, destination, date)
    n = 2 + stable_int("nf", origin, destination, date, mod=3)
    return {"flights": [
        {"flight_id": f"{origin[:2]}{stable_int('id', origin, destination, date, i, mod=900) + 100}",
         "depart": f"{6 + 3 * i:02d}:{15 * stable_int('m', origin, date, i, mod=4):02d}",
         "price": 80 + stable_int("p", origin, destination, date, i, mod=600)} for i in range(n)]}


def book_flight(flight_id: str, passenger: str) -> dict:
    if not (len(flight_id) == 5 and flight_id[:2].isalpha() and flight_id[2:].isdigit()):
        raise ToolError("not_found", f"flight {flight_id!r} not found; use an id from search.")
    return {"confirmation": f"CF{stable_int('cf', flight_id, passenger, mod=9000) + 1000}",
            "flight_id": flight_id, "passenger": passenger}


TOOLS = [
    tool("search_flights", "Flights on a route and date (YYYY-MM-DD) with prices.",
         {"origin": {**S, "description": "IATA code"},
          "destination": {**S, "description": "IATA code"}, "date": S}),
    tool("book_flight", "Book a seat; returns a confirmation code.",
         {"flight_id": S, "passenger": S}),
]


def _route(rng: random.Random):
    o, d = rng.sample(AIRPORTS, 2)
    return o, d, rng.choice(DATES)


def single(rng: random.Random) -> Example:
    o, d, date = _route(rng)
    cheapest = min(f["price"] for f in search_flights(o, d, date)["flights"])
    return Example(f"What is the cheapest fare from {o} to {d} on {date}?", cheapest,
                   [[("search_flights", {"origin": o, "destination": d, "date": date})]],
                   f"The cheapest fare is {cheapest}.", "Search the route and take the minimum.")


def parallel(rng: random.Random) -> Example:
    o, d, date = _route(rng)
    date2 = rng.choice([x for x in DATES if x != date])
    a = min(f["price"] for f in search_flights(o, d, date)["flights"])
    b = min(f["price"] for f in search_flights(o, d, date2)["flights"])
    best = date if a <= b else date2
    return Example(f"Is it cheaper to fly {o} to {d} on {date} or on {date2}? Give the date.",
                   best,
                   [[("search_flights", {"origin": o, "destination": d, "date": date}),
                     ("search_flights", {"origin": o, "destination": d, "date": date2})]],
                   f"Cheapest on {date}: {a}; on {date2}: {b}. Fly on {best}.",
                   "Search both dates at once and compare the cheapest fares.")


def chained(rng: random.Random) -> Example:
    o, d, date = _route(rng)
    name = rng.choice(["Ana Lopez", "Ken Ito", "Sam Lee"])
    best = min(search_flights(o, d, date)["flights"], key=lambda f: f["price"])
    conf = book_flight(best["flight_id"], name)["confirmation"]
    return Example(f"Book the cheapest flight from {o} to {d} on {date} for {name} and give me "
                   "the confirmation code.", conf,
                   [[("search_flights", {"origin": o, "destination": d, "date": date})],
                    [("book_flight", {"flight_id": best["flight_id"], "passenger": name})]],
                   f"Booked {best['flight_id']} for {name}; confirmation {conf}.",
                   "Search, pick the cheapest flight, book it.")


DOMAIN = Domain("flights", TOOLS, {"search_flights": search_flights, "book_flight": book_flight},
                {"single": single, "parallel": parallel, "chained": chained})
