"""The gate's settings: promotion thresholds (`gate:`) and the canary suites (`canaries:`),
read by the promote decision and the gate."""
from __future__ import annotations

from typing import Any, ClassVar, Iterable, Literal

from pydantic import Field, field_validator, model_validator

from data.bfcl import CATEGORIES as BFCL_CATEGORIES
from data.canary_names import BFCL_PREFIX, CANARIES, canary_choices, off_canary_table
from engine.settings import Strict

RoundSettings = Any  # a round's settings (rounds/settings.py): its `canaries`, `drop_abs`


class GateSettings(Strict):
    """The gate's thresholds, which the promote decision reads as they are, and what a failed
    gate does to the run (`on_fail`)."""
    DEFAULT_DROP_ABS: ClassVar[float] = 0.02  # drop tolerance of a canary not in `drop_abs`

    keep_se: float = Field(2.0, ge=0, description="target must improve by this many paired SEs")
    drop_se: float = Field(2.0, ge=0, description="no canary may drop by more than this many SEs")
    allow_tie: bool = Field(False, description="target passes at delta >= 0 (relaxed presets "
                                               "only: a random tiny model cannot improve)")
    drop_abs: dict[str, float] = Field(default_factory=dict,
                                       description="absolute drop tolerance per canary "
                                                   "(default 0.02); bfcl_<category> too")
    floors: dict[str, float] = Field(default_factory=dict, description="absolute floor per "
                                                                       "canary; bfcl_<category> "
                                                                       "too (configured ones)")
    anchored: list[str] = Field(default_factory=list,
                                description="canaries that must also stay within the drop "
                                            "rule of the base model's score, not only of the "
                                            "previous promoted model's: drops that are each "
                                            "within noise cannot add up below the base over "
                                            "the rounds")
    relaxed: bool = Field(False, description="thresholds relaxed (tiny preset); shown in reports")
    on_fail: Literal["stop", "skip"] = Field("stop", description="a failed gate stops the run or "
                                                                 "skips the round")

    @model_validator(mode="after")
    def _check(self):
        for name, table in (("drop_abs", self.drop_abs), ("floors", self.floors),
                            ("anchored", dict.fromkeys(self.anchored, 0.0))):
            bad = off_canary_table(table)
            if bad:
                raise ValueError(f"gate.{name}: {bad}: keys must be canaries ("
                                 f"{canary_choices()}), values in [0, 1]")
        if self.allow_tie and not self.relaxed:
            raise ValueError("gate.allow_tie needs gate.relaxed: true (it is shown as relaxed "
                             "in every report)")
        return self

    def tolerance_abs(self, canary: str) -> float:
        """How far `canary` may drop whatever its SE: its `drop_abs` entry, else 0.02."""
        return float(self.drop_abs.get(canary, self.DEFAULT_DROP_ABS))

    def for_round(self, rs: RoundSettings) -> GateSettings:
        """These thresholds with the round's own `drop_abs` entries over `drop_abs`."""
        if not rs.drop_abs:
            return self
        return self.model_copy(update={"drop_abs": {**self.drop_abs, **rs.drop_abs}})

    def to_dict(self, canaries: Iterable[str] = ()) -> dict:
        """The thresholds as gate reports record them, the tolerance of every built-in canary,
        of every canary in `drop_abs` and of `canaries` (the evaluated ones: BFCL) spelled out."""
        names = dict.fromkeys([*CANARIES, *self.drop_abs, *canaries])
        return {"keep_se": self.keep_se, "drop_se": self.drop_se,
                "drop_abs": {c: self.tolerance_abs(c) for c in names},
                "floors": dict(self.floors), "anchored": list(self.anchored),
                "relaxed": self.relaxed,
                "allow_tie": self.allow_tie}


class CanarySettings(Strict):
    version: str = Field("v2", description="canary item set; a new version draws new items "
                                           "(v2: the reasoning generator never makes negative "
                                           "change)")
    k: int = Field(2, ge=1, description="samples per item (pass@k)")
    sizes: dict[str, int] = Field(default_factory=lambda: {c: 20 for c in CANARIES},
                                  description="items per built-in canary (every gate; a round's "
                                              "canaries key sizes its own)")
    max_new_tokens: int = Field(192, ge=8, description="tokens per assistant turn of a canary "
                                                       "(0 would score empty outputs)")
    temperature: float = Field(0.7, ge=0.0, description="sampling temperature of evaluations "
                                                        "(0: greedy)")
    files: list[str] = Field(default_factory=list, description="extra suites: BFCL/GSM8K files")
    bfcl: dict[str, int] = Field(default_factory=dict,
                                 description="BFCL categories as canaries, category -> items "
                                             "(a seeded sample per version), scored by BFCL's "
                                             "own checkers; suites named bfcl_<category>")

    @model_validator(mode="after")
    def _check(self):
        bad = set(self.sizes) - set(CANARIES)
        if bad:
            raise ValueError(f"unknown canary(ies) {sorted(bad)}; choose from {CANARIES}")
        small = {c: n for c, n in self.sizes.items() if n < 1}
        if small:
            raise ValueError(f"canaries.sizes: {small}: a canary needs at least 1 item (leave "
                             "it out to skip it)")
        return self

    @field_validator("bfcl")
    @classmethod
    def _bfcl(cls, sizes: dict[str, int]) -> dict[str, int]:
        bad = [c for c in sizes if c not in BFCL_CATEGORIES]
        if bad:
            raise ValueError(f"unknown BFCL category(ies) {bad}; choose from "
                             f"{', '.join(BFCL_CATEGORIES)}")
        small = {c: n for c, n in sizes.items() if n < 1}
        if small:
            raise ValueError(f"{small}: a BFCL canary needs at least 1 item (leave the "
                             "category out to skip it)")
        return sizes

    def size(self, canary: str, rs: RoundSettings | None = None) -> int:
        """Configured items of `canary` (built-in or `bfcl_<category>`) in round `rs`'s gate
        (None: the run-wide size); 0 if not configured. A BFCL category with fewer items than
        asked for gives all it has."""
        if canary.startswith(BFCL_PREFIX) and canary not in CANARIES:
            return int(self.bfcl.get(canary[len(BFCL_PREFIX):], 0))
        return int(self.sizes_for(rs).get(canary, 0))

    def sizes_for(self, rs: RoundSettings | None = None) -> dict[str, int]:
        """Built-in canary sizes of round `rs`'s gate: `sizes`, with the round's own
        `canaries` over them (None: `sizes`)."""
        return {**self.sizes, **(rs.canaries if rs is not None else {})}

    def largest_sizes(self, rounds: Iterable[RoundSettings]) -> dict[str, int]:
        """Each built-in canary at its largest size over `rounds` and `sizes`: the items
        whose prompts no training row may share. Canary items are prefix-stable (the first n
        of a larger suite are the suite of n), so these cover every round's suites."""
        out = dict(self.sizes)
        for rs in rounds:
            for name, n in rs.canaries.items():
                out[name] = max(n, out.get(name, 0))
        return out
