"""Calendar: events per day, free slots and bookings, over a mock schedule."""
from __future__ import annotations

import random

from .base import Domain, Example, I, S, ToolError, phrase, stable_int, tool

DAYS = [f"2026-{m:02d}-{d:02d}" for m in (3, 4, 5) for d in range(1, 29)]
TITLES = ["standup", "design review", "1:1", "planning", "lunch", "demo", "retro", "interview"]


def _day(date: str) -> str:
    if date not in DAYS:
        raise ToolError("not_found", f"no calendar for {date!r}; dates run {DAYS[0]} to {DAYS[-1]} "
                                     "in YYYY-MM-DD form.")
    return date


def list_events(date: str) -> dict:
    _day(date)
    n = stable_int("n", date, mod=4) + 1
    hours = sorted({9 + stable_int("h", date, i, mod=8) for i in range(n)})
    return {"date": date, "events": [
        {"start": f"{h:02d}:00", "minutes": 60,
         "title": TITLES[stable_int("t", date, h, mod=len(TITLES))]} for h in hours]}


def find_free_slot(date: str, minutes: int) -> dict:
    busy = {int(e["start"][:2]) for e in list_events(date)["events"]}
    if minutes not in (30, 60):
        raise ToolError("invalid_argument", "minutes must be 30 or 60.")
    for h in range(9, 17):
        if h not in busy:
            return {"date": date, "start": f"{h:02d}:00"}
    raise ToolError("not_found", f"no free slot on {date}.")


def book_meeting(date: str, start: str, minutes: int, title: str) -> dict:
    if start in {e["start"] for e in list_events(date)["events"]}:
        raise ToolError("conflict", f"{start} on {date} is taken; ask find_free_slot first.")
    return {"event_id": f"EV-{stable_int('ev', date, start, title, mod=90000) + 10000}",
            "date": date, "start": start}


TOOLS = [
    tool("list_events", "Events on a date (YYYY-MM-DD).", {"date": S}),
    tool("find_free_slot", "Earliest free start time between 09:00 and 17:00 on a date.",
         {"date": S, "minutes": {**I, "description": "30 or 60"}}),
    tool("book_meeting", "Book a meeting; returns its event id.",
         {"date": S, "start": {**S, "description": "HH:MM"}, "minutes": I, "title": S}),
]


def single(rng: random.Random) -> Example:
    date = rng.choice(DAYS)
    n = len(list_events(date)["events"])
    ask = phrase(rng, ["How many events do I have on {d}?",
                       "How many meetings are on my calendar on {d}?",
                       "Count my calendar events for {d}.", "How busy am I on {d}: how many events?"],
                 d=date)
    return Example(ask, n,
                   [[("list_events", {"date": date})]],
                   f"On {date} you have {n} events.", f"List the events of {date} and count them.")


def parallel(rng: random.Random) -> Example:
    a, b = sorted(rng.sample(DAYS, 2))
    na, nb = len(list_events(a)["events"]), len(list_events(b)["events"])
    return Example(f"How many events do I have on {a} and {b} combined?", na + nb,
                   [[("list_events", {"date": a}), ("list_events", {"date": b})]],
                   f"{na} on {a} and {nb} on {b}: {na + nb} in total.",
                   "List both days at once and add the counts.")


def chained(rng: random.Random) -> Example:
    date, title = rng.choice(DAYS), rng.choice(["sync with Ana", "budget call", "code review"])
    start = find_free_slot(date, 60)["start"]
    ev = book_meeting(date, start, 60, title)["event_id"]
    return Example(f"Book a one-hour '{title}' on {date} at the earliest free time and tell me "
                   "the event id.", ev,
                   [[("find_free_slot", {"date": date, "minutes": 60})],
                    [("book_meeting", {"date": date, "start": start, "minutes": 60,
                                       "title": title})]],
                   f"Booked '{title}' on {date} at {start}; the event id is {ev}.",
                   "Find the earliest free hour, then book it.")


DOMAIN = Domain("calendar", TOOLS, {"list_events": list_events, "find_free_slot": find_free_slot,
                                    "book_meeting": book_meeting},
                {"single": single, "parallel": parallel, "chained": chained})
