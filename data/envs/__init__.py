"""Built-in tool domains, by name."""
from . import calendar, currency, flights, inventory, units, weather
from .base import Domain, ToolError

DOMAINS: dict[str, Domain] = {m.DOMAIN.name: m.DOMAIN for m in
                              (weather, currency, calendar, inventory, units, flights)}

__all__ = ["DOMAINS", "Domain", "ToolError"]
