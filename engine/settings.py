"""The one strict base of every settings class, and the error a wrong config raises.

Settings live beside the code that reads them (gates/settings.py, export/settings.py,
rounds/settings.py, engine/sampling/settings.py, engine/training/settings.py); the roof
(`pipeline/config.py`) assembles them into the run config.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ConfigError(ValueError):
    """The config is wrong; the message names the file and key and says what to do."""


class Strict(BaseModel):
    """Unknown keys are errors, so a misspelt key in a config or run.yaml is caught."""
    model_config = ConfigDict(extra="forbid")
