"""Weather: current conditions and forecasts over a fixed table of cities."""
from __future__ import annotations

import random

from .base import Domain, Example, I, S, ToolError, phrase, stable_int, tool

CITIES = {"Paris": "CDG", "Tokyo": "HND", "New York": "JFK", "London": "LHR", "Berlin": "BER",
          "Madrid": "MAD", "Rome": "FCO", "Sydney": "SYD", "Toronto": "YYZ", "Cairo": "CAI",
          "Mumbai": "BOM", "Seoul": "ICN", "Lima": "LIM", "Oslo": "OSL", "Nairobi": "NBO",
          "Dublin": "DUB", "Lisbon": "LIS", "Vienna": "VIE", "Prague": "PRG", "Athens": "ATH",
          "Istanbul": "IST", "Dubai": "DXB", "Singapore": "SIN", "Bangkok": "BKK",
          "Hong Kong": "HKG", "Chicago": "ORD", "Denver": "DEN", "Miami": "MIA",
          "Mexico City": "MEX", "Santiago": "SCL", "Cape Town": "CPT", "Helsinki": "HEL"}
ALIASES = {"NYC": "New York", "Bombay": "Mumbai", "Roma": "Rome", "Kairo": "Cairo"}
CONDITIONS = ["sunny", "cloudy", "rainy", "windy", "snowy", "foggy"]
AIRPORTS = {code: city for city, code in CITIES.items()}


def _city(city: str) -> str:
    if city not in CITIES:
        hint = f" Did you mean {ALIASES[city]!r}?" if city in ALIASES else ""
        raise ToolError("not_found", f"city {city!r} not found.{hint}")
    return city


def temp_c(city: str, day: int = 0) -> int:
    return stable_int("temp", city, day, mod=36) - 5


def get_weather(city: str, unit: str = "C") -> dict:
    city = _city(city)
    if unit not in ("C", "F"):
        raise ToolError("invalid_argument", f"unit {unit!r} is invalid; use 'C' or 'F'.")
    t = temp_c(city)
    return {"city": city, "temperature": t if unit == "C" else round(t * 9 / 5 + 32),
            "unit": unit, "condition": CONDITIONS[stable_int("cond", city, mod=len(CONDITIONS))]}


def get_forecast(city: str, days: int) -> dict:
    city = _city(city)
    if not 1 <= days <= 7:
        raise ToolError("invalid_argument", "days must be between 1 and 7.")
    return {"city": city, "unit": "C", "highs": [temp_c(city, d + 1) for d in range(days)]}


def city_for_airport(code: str) -> dict:
    if code not in AIRPORTS:
        raise ToolError("not_found", f"airport {code!r} not found.")
    return {"code": code, "city": AIRPORTS[code]}


TOOLS = [
    tool("get_weather", "Current weather for a city.",
         {"city": {**S, "description": "City name, e.g. Paris"},
          "unit": {**S, "description": "'C' or 'F'"}}, ["city"]),
    tool("get_forecast", "Daily high temperatures (Celsius) for the next days.",
         {"city": S, "days": {**I, "description": "1 to 7"}}),
    tool("city_for_airport", "The city an airport code (IATA) serves.", {"code": S}),
]


def single(rng: random.Random) -> Example:
    city, unit = rng.choice(list(CITIES)), rng.choice(["C", "F"])
    t = get_weather(city, unit)["temperature"]
    word = "Celsius" if unit == "C" else "Fahrenheit"
    alias = next((a for a, c in ALIASES.items() if c == city), None)
    ask = phrase(rng, ["What is the temperature in {c} right now, in {w}?",
                       "How warm is it in {c} at the moment, in {w}?",
                       "Tell me the current temperature in {c} in degrees {w}.",
                       "What does the thermometer read in {c} now, in {w}?"], c=city, w=word)
    return Example(ask, t,
                   [[("get_weather", {"city": city, "unit": unit})]],
                   f"It is {t} °{unit} in {city}.",
                   f"I need the current weather in {city} in {word}.",
                   ("get_weather", "city", alias, city) if alias else None)


def parallel(rng: random.Random) -> Example:
    a, b = rng.sample(list(CITIES), 2)
    ta, tb = temp_c(a), temp_c(b)
    diff = abs(ta - tb)
    return Example(f"How many degrees Celsius apart are {a} and {b} right now?", diff,
                   [[("get_weather", {"city": a, "unit": "C"}),
                     ("get_weather", {"city": b, "unit": "C"})]],
                   f"{a} is {ta} °C and {b} is {tb} °C, so they are {diff} degrees apart.",
                   f"I will get the weather of {a} and {b} at once and subtract.")


def chained(rng: random.Random) -> Example:
    city = rng.choice(list(CITIES))
    code = CITIES[city]
    days = rng.randint(2, 5)
    highs = get_forecast(city, days)["highs"]
    top = max(highs)
    return Example(f"What is the highest temperature forecast over the next {days} days in the "
                   f"city served by airport {code}?", top,
                   [[("city_for_airport", {"code": code})],
                    [("get_forecast", {"city": city, "days": days})]],
                   f"The highest forecast temperature in {city} is {top} °C.",
                   f"First find the city for {code}, then get its {days}-day forecast.")


DOMAIN = Domain("weather", TOOLS,
                {"get_weather": get_weather, "get_forecast": get_forecast,
                 "city_for_airport": city_for_airport},
                {"single": single, "parallel": parallel, "chained": chained})
