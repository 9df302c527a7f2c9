"""Calculators: geometry, finance, physics, statistics and number theory formulas as tools.

The built-in domains look things up that a model cannot know (a forecast, a rate, a flight),
so "call the tool" and "the request names a fact I lack" coincide there. Real tool sets also
offer computations a model believes it can do itself ("the area of a triangle with base 10",
"the GCD of 36 and 48"), where the right move is still to call the calculator that is offered,
and to abstain when the offered calculators compute something else. This domain teaches both:
every request carries the numbers a call needs; a single task offers the fitting formula beside
near misses of the same domain; an irrelevance task asks for a formula none of its offered
calculators computes. Names mix naming conventions, as tool sets from different vendors do.

Shipped but not built in: a round uses it when it names `formulas` in its domains; it is never
a distractor of other domains' tasks, so the canaries' tool mixes stay as they were.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Callable

from .base import Domain, Example, I, N, ToolError, fmt_num, schema_checked, tool

NEAR = (2, 5)   # other formulas offered beside the fitting one (single) or instead (irrelevance)


@dataclass(frozen=True)
class Formula:
    name: str
    description: str
    params: dict[str, tuple[dict, str, Callable[[random.Random], float]]]  # schema, words, draw
    fn: Callable[..., float]
    asks: tuple[str, ...]   # request templates over the parameter names
    what: str               # "the area of the circle" (the final answer's subject)


def _num(lo: float, hi: float, dp: int = 1) -> Callable[[random.Random], float]:
    def draw(rng: random.Random) -> float:
        v = round(rng.uniform(lo, hi), rng.choice(range(dp + 1)))
        return int(v) if v == int(v) else v
    return draw


def _int(lo: int, hi: int) -> Callable[[random.Random], int]:
    return lambda rng: rng.randint(lo, hi)


def _p(schema: dict, words: str, draw) -> tuple[dict, str, Callable]:
    return {**schema, "description": words}, words, draw


def _mean(xs):
    return sum(xs) / len(xs)


def _sd(xs):
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def _median(xs):
    s, n = sorted(xs), len(xs)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


NUMBERS = {"type": "array", "items": N, "minItems": 1}
_LIST = (NUMBERS, "the numbers", lambda rng: [rng.randint(1, 60) for _ in range(rng.randint(4, 7))])

FORMULAS: list[Formula] = [
    Formula("geometry.circle_area", "Area of a circle from its radius.",
            {"radius": _p(N, "radius of the circle", _num(1, 30))},
            lambda radius: math.pi * radius ** 2,
            ("What is the area of a circle with a radius of {radius}?",
             "Calculate the area of a circle whose radius is {radius} units."),
            "the area of the circle"),
    Formula("rectangle_area", "Area of a rectangle from its length and width.",
            {"length": _p(N, "length of the rectangle", _num(1, 80)),
             "width": _p(N, "width of the rectangle", _num(1, 50))},
            lambda length, width: length * width,
            ("Find the area of a rectangle {length} long and {width} wide.",
             "How large is a rectangle with length {length} and width {width}?"),
            "the area of the rectangle"),
    Formula("calcTriangleArea", "Area of a triangle from its base and height.",
            {"base": _p(N, "length of the base", _num(1, 40)),
             "height": _p(N, "height over the base", _num(1, 40))},
            lambda base, height: base * height / 2,
            ("What is the area of a triangle with base {base} and height {height}?",
             "Compute the area of a triangle whose base is {base} and height is {height}."),
            "the area of the triangle"),
    Formula("math_hypotenuse", "Length of a right triangle's hypotenuse from its two legs.",
            {"leg_a": _p(N, "first leg", _num(1, 30)), "leg_b": _p(N, "second leg", _num(1, 30))},
            lambda leg_a, leg_b: math.hypot(leg_a, leg_b),
            ("A right triangle has legs of {leg_a} and {leg_b}. How long is its hypotenuse?",
             "Find the hypotenuse of a right triangle with legs {leg_a} and {leg_b}."),
            "the hypotenuse"),
    Formula("geometry.sphere_volume", "Volume of a sphere from its radius.",
            {"radius": _p(N, "radius of the sphere", _num(1, 20))},
            lambda radius: 4 / 3 * math.pi * radius ** 3,
            ("What is the volume of a sphere with radius {radius}?",
             "Calculate the volume of a ball whose radius is {radius} cm."),
            "the volume of the sphere"),
    Formula("cylinder_volume", "Volume of a cylinder from its radius and height.",
            {"radius": _p(N, "radius of the base", _num(1, 15)),
             "height": _p(N, "height of the cylinder", _num(1, 40))},
            lambda radius, height: math.pi * radius ** 2 * height,
            ("What is the volume of a cylinder with radius {radius} and height {height}?",
             "How much does a cylindrical tank of radius {radius} m and height {height} m hold, "
             "in cubic meters?"),
            "the volume of the cylinder"),
    Formula("finance.compound_interest",
            "Final balance of a deposit with interest compounded yearly.",
            {"principal": _p(N, "initial deposit", _int(500, 20000)),
             "annual_rate": _p(N, "yearly interest rate in percent", _num(1, 9)),
             "years": _p(I, "number of years", _int(1, 30))},
            lambda principal, annual_rate, years: principal * (1 + annual_rate / 100) ** years,
            ("What will {principal} dollars grow to in {years} years at {annual_rate}% a year, "
             "compounded yearly?",
             "Calculate the balance after {years} years of a {principal} deposit with "
             "{annual_rate} percent annual compound interest."),
            "the final balance"),
    Formula("simpleInterest", "Interest earned without compounding.",
            {"principal": _p(N, "amount lent", _int(100, 10000)),
             "rate": _p(N, "yearly rate in percent", _num(1, 12)),
             "years": _p(N, "duration in years", _int(1, 10))},
            lambda principal, rate, years: principal * rate / 100 * years,
            ("How much simple interest does {principal} earn at {rate}% for {years} years?",
             "Compute the simple interest on a loan of {principal} at a rate of {rate} percent "
             "over {years} years."),
            "the interest"),
    Formula("loan_monthly_payment", "Monthly payment of an amortised loan.",
            {"principal": _p(N, "amount borrowed", _int(1000, 300000)),
             "annual_rate": _p(N, "yearly interest rate in percent", _num(1, 10)),
             "months": _p(I, "number of monthly payments", _int(12, 360))},
            lambda principal, annual_rate, months: (
                principal * (annual_rate / 1200) / (1 - (1 + annual_rate / 1200) ** -months)),
            ("What is the monthly payment on a {principal} loan at {annual_rate}% a year over "
             "{months} months?",
             "Calculate the monthly installment for borrowing {principal} for {months} months "
             "at an annual rate of {annual_rate} percent."),
            "the monthly payment"),
    Formula("stats.percent_change", "Percentage change from an old value to a new one.",
            {"old_value": _p(N, "value before", _int(10, 900)),
             "new_value": _p(N, "value after", _int(10, 900))},
            lambda old_value, new_value: (new_value - old_value) / old_value * 100,
            ("By what percentage did a price go from {old_value} to {new_value}?",
             "Calculate the percent change from {old_value} to {new_value}."),
            "the change in percent"),
    Formula("health_bmi", "Body mass index from weight in kilograms and height in meters.",
            {"weight_kg": _p(N, "weight in kilograms", _int(40, 130)),
             "height_m": _p(N, "height in meters", _num(1.45, 2.05, 2))},
            lambda weight_kg, height_m: weight_kg / height_m ** 2,
            ("What is the BMI of someone who weighs {weight_kg} kg and is {height_m} m tall?",
             "Calculate the body mass index for a weight of {weight_kg} kilograms and a height "
             "of {height_m} meters."),
            "the BMI"),
    Formula("physics.kinetic_energy", "Kinetic energy in joules from mass and speed.",
            {"mass": _p(N, "mass in kilograms", _num(1, 2000)),
             "velocity": _p(N, "speed in meters per second", _num(1, 60))},
            lambda mass, velocity: 0.5 * mass * velocity ** 2,
            ("What is the kinetic energy of a {mass} kg object moving at {velocity} m/s?",
             "Calculate the kinetic energy of a car of mass {mass} kg at a speed of {velocity} "
             "meters per second."),
            "the kinetic energy in joules"),
    Formula("finalVelocity", "Velocity after constant acceleration for some time.",
            {"initial_velocity": _p(N, "starting velocity in m/s", _int(0, 30)),
             "acceleration": _p(N, "acceleration in m/s^2", _num(0.5, 10)),
             "time": _p(N, "time in seconds", _int(1, 60))},
            lambda initial_velocity, acceleration, time: initial_velocity + acceleration * time,
            ("A body starts at {initial_velocity} m/s and accelerates at {acceleration} m/s^2 "
             "for {time} seconds. What is its final velocity?",
             "Calculate the final speed after {time} s of acceleration at {acceleration} m/s^2 "
             "from an initial speed of {initial_velocity} m/s."),
            "the final velocity in m/s"),
    Formula("average_speed", "Average speed from distance and time.",
            {"distance": _p(N, "distance in kilometers", _int(5, 900)),
             "hours": _p(N, "time in hours", _num(0.5, 12))},
            lambda distance, hours: distance / hours,
            ("What is the average speed of a trip of {distance} km that takes {hours} hours?",
             "Compute the average speed for {distance} kilometers covered in {hours} hours."),
            "the average speed in km/h"),
    Formula("material_density", "Density from mass and volume.",
            {"mass": _p(N, "mass in grams", _int(1, 5000)),
             "volume": _p(N, "volume in cubic centimeters", _int(1, 900))},
            lambda mass, volume: mass / volume,
            ("What is the density of an object with mass {mass} g and volume {volume} cm^3?",
             "Calculate the density of a sample weighing {mass} grams that fills {volume} cubic "
             "centimeters."),
            "the density in g/cm^3"),
    Formula("electric.ohms_law_current", "Current in amperes from voltage and resistance.",
            {"voltage": _p(N, "voltage in volts", _int(1, 240)),
             "resistance": _p(N, "resistance in ohms", _int(1, 500))},
            lambda voltage, resistance: voltage / resistance,
            ("What current flows through a {resistance} ohm resistor at {voltage} volts?",
             "Calculate the current for a voltage of {voltage} V across a resistance of "
             "{resistance} ohms."),
            "the current in amperes"),
    Formula("gcd_of", "Greatest common divisor of two integers.",
            {"a": _p(I, "first integer", _int(12, 480)), "b": _p(I, "second integer",
                                                                 _int(12, 480))},
            lambda a, b: math.gcd(a, b),
            ("What is the greatest common divisor of {a} and {b}?",
             "Find the GCD of the numbers {a} and {b}."),
            "the greatest common divisor"),
    Formula("numberTheory.lcm", "Least common multiple of two integers.",
            {"x": _p(I, "first integer", _int(2, 60)), "y": _p(I, "second integer", _int(2, 60))},
            lambda x, y: x * y // math.gcd(x, y),
            ("What is the least common multiple of {x} and {y}?",
             "Find the LCM of {x} and {y}."),
            "the least common multiple"),
    Formula("factorial", "n! for a non-negative integer n.",
            {"n": _p(I, "the integer", _int(3, 15))},
            lambda n: math.factorial(n),
            ("What is the factorial of {n}?", "Calculate {n} factorial."),
            "the factorial"),
    Formula("seq.fibonacci_number", "The n-th Fibonacci number (F(1) = 1, F(2) = 1).",
            {"n": _p(I, "position in the sequence", _int(5, 40))},
            _fib,
            ("What is Fibonacci number {n}, counting F(1) = 1?",
             "Give me the Fibonacci number at position {n} of the sequence."),
            "the Fibonacci number"),
    Formula("stats_mean", "Arithmetic mean of a list of numbers.",
            {"numbers": _p(*_LIST)}, lambda numbers: _mean(numbers),
            ("What is the average of {numbers}?", "Calculate the mean of these values: {numbers}."),
            "the mean"),
    Formula("stats.standard_deviation", "Population standard deviation of a list of numbers.",
            {"numbers": _p(*_LIST)}, lambda numbers: _sd(numbers),
            ("What is the standard deviation of {numbers}?",
             "Compute the population standard deviation of {numbers}."),
            "the standard deviation"),
    Formula("medianOf", "Median of a list of numbers.",
            {"numbers": _p(*_LIST)}, lambda numbers: _median(numbers),
            ("What is the median of {numbers}?", "Find the middle value (median) of {numbers}."),
            "the median"),
    Formula("physics.force", "Force in newtons from mass and acceleration.",
            {"mass": _p(N, "mass in kilograms", _num(1, 500)),
             "acceleration": _p(N, "acceleration in m/s^2", _num(0.5, 20))},
            lambda mass, acceleration: mass * acceleration,
            ("What force accelerates a {mass} kg mass at {acceleration} m/s^2?",
             "Calculate the force needed to push {mass} kilograms at an acceleration of "
             "{acceleration} m/s^2."),
            "the force in newtons"),
    Formula("potential_energy", "Gravitational potential energy in joules (g = 9.81).",
            {"mass": _p(N, "mass in kilograms", _num(1, 200)),
             "height": _p(N, "height in meters", _num(1, 100))},
            lambda mass, height: mass * 9.81 * height,
            ("What is the potential energy of a {mass} kg mass lifted {height} m?",
             "Calculate the gravitational potential energy of {mass} kg at a height of {height} "
             "meters."),
            "the potential energy in joules"),
    Formula("tipCalculator", "Tip for a bill at a percentage.",
            {"bill": _p(N, "bill amount", _num(5, 400, 2)),
             "percent": _p(N, "tip in percent", _int(5, 25))},
            lambda bill, percent: bill * percent / 100,
            ("How much is a {percent}% tip on a bill of {bill}?",
             "Calculate the tip for a {bill} check at {percent} percent."),
            "the tip"),
    Formula("retail.discounted_price", "Price after a percentage discount.",
            {"price": _p(N, "original price", _num(5, 2000, 2)),
             "discount_percent": _p(N, "discount in percent", _int(5, 70))},
            lambda price, discount_percent: price * (1 - discount_percent / 100),
            ("What does an item priced {price} cost after a {discount_percent}% discount?",
             "Calculate the sale price of a {price} jacket with {discount_percent} percent off."),
            "the discounted price"),
    Formula("combinatorics.combinations", "Number of ways to choose k items from n (nCk).",
            {"n": _p(I, "number of items", _int(5, 30)), "k": _p(I, "items chosen", _int(2, 5))},
            lambda n, k: math.comb(n, k),
            ("In how many ways can I choose {k} items out of {n}?",
             "Calculate the number of combinations of {n} things taken {k} at a time."),
            "the number of combinations"),
    Formula("quadratic_discriminant", "Discriminant b^2 - 4ac of ax^2 + bx + c.",
            {"a": _p(I, "coefficient of x^2", _int(1, 9)), "b": _p(I, "coefficient of x",
                                                                   _int(-20, 20)),
             "c": _p(I, "constant term", _int(-20, 20))},
            lambda a, b, c: b * b - 4 * a * c,
            ("What is the discriminant of the quadratic with a={a}, b={b} and c={c}?",
             "Compute b^2 - 4ac for the equation {a}x^2 + {b}x + {c} = 0."),
            "the discriminant"),
    Formula("geo.point_distance", "Straight-line distance between two points in the plane.",
            {"x1": _p(I, "x of the first point", _int(-20, 20)),
             "y1": _p(I, "y of the first point", _int(-20, 20)),
             "x2": _p(I, "x of the second point", _int(-20, 20)),
             "y2": _p(I, "y of the second point", _int(-20, 20))},
            lambda x1, y1, x2, y2: math.hypot(x2 - x1, y2 - y1),
            ("How far apart are the points ({x1}, {y1}) and ({x2}, {y2})?",
             "Calculate the distance between ({x1}, {y1}) and ({x2}, {y2})."),
            "the distance"),
]
BY_NAME = {f.name: f for f in FORMULAS}


def _computed(f: Formula) -> Callable[[dict], dict]:
    """The formula on checked arguments, rounded to 4 places; a math error is the caller's."""
    def body(args: dict) -> dict:
        try:
            return {"result": round(float(f.fn(**args)), 4)}
        except (ValueError, ZeroDivisionError, OverflowError) as err:
            raise ToolError("invalid_argument", f"{f.name}: {err}") from None
    return body


TOOLS = [tool(f.name, f.description, {p: s for p, (s, _, _) in f.params.items()})
         for f in FORMULAS]
DECL = {t["function"]["name"]: t for t in TOOLS}
IMPL = {f.name: schema_checked(DECL[f.name], _computed(f)) for f in FORMULAS}  # jsonschema-checked


def _ask(rng: random.Random, f: Formula) -> tuple[str, dict]:
    args = {p: draw(rng) for p, (_, _, draw) in f.params.items()}
    shown = {p: ", ".join(map(str, v)) if isinstance(v, list) else v for p, v in args.items()}
    return rng.choice(f.asks).format(**shown), args


def _others(rng: random.Random, skip: str, lo: int, hi: int) -> list[dict]:
    return [DECL[n] for n in rng.sample([n for n in DECL if n != skip], rng.randint(lo, hi))]


def single(rng: random.Random) -> Example:
    f = rng.choice(FORMULAS)
    prompt, args = _ask(rng, f)
    out = IMPL[f.name](**args)["result"]
    tools = [DECL[f.name]] + _others(rng, f.name, *NEAR)
    rng.shuffle(tools)
    return Example(prompt, out, [[(f.name, args)]], f"{f.what[0].upper()}{f.what[1:]} is "
                   f"{fmt_num(out)}.", f"{f.name} computes {f.what}; the request gives its "
                   "inputs.", tools=tools)


def parallel(rng: random.Random) -> Example:
    """One formula on two sets of inputs in one turn; the sum of the two results."""
    f = rng.choice([f for f in FORMULAS if "numbers" not in f.params])
    (p1, a1), (p2, a2) = _ask(rng, f), _ask(rng, f)
    r1, r2 = IMPL[f.name](**a1)["result"], IMPL[f.name](**a2)["result"]
    total = round(r1 + r2, 4)
    tools = [DECL[f.name]] + _others(rng, f.name, 1, 3)
    rng.shuffle(tools)
    return Example(f"Two questions, then add the answers. First: {p1} Second: {p2}", total,
                   [[(f.name, a1), (f.name, a2)]],
                   f"{fmt_num(r1)} + {fmt_num(r2)} = {fmt_num(total)}.",
                   f"Call {f.name} for both at once, then add.", tools=tools)


def irrelevance(rng: random.Random) -> Example:
    """A formula request offered only calculators that compute something else."""
    f = rng.choice(FORMULAS)
    prompt, _ = _ask(rng, f)
    tools = _others(rng, f.name, *NEAR)
    names = [t["function"]["name"] for t in tools]
    listed = ", ".join(names[:-1]) + " and " + names[-1]
    return Example(prompt, None, [],
                   f"None of the available tools can do this: {listed} are for something else, "
                   "so I cannot answer it with them.",
                   "The request needs a tool the offered ones do not provide; I answer without "
                   "calling.", tools=tools)


DOMAIN = Domain("formulas", TOOLS, IMPL,
                {"single": single, "parallel": parallel, "irrelevance": irrelevance})
