"""The promote decision: a pure function of (candidate eval, baseline eval, gate settings).

Inputs are the dicts `gates.evaluate` writes (`EvalResult.to_dict()`): per suite a content
hash, a primary metric and per-item values of every metric. Rules, each reported with its
numbers whether it passed or not:
  same-items     every baseline canary was evaluated on the identical suite (same hash);
  target         the round's target metric improved by at least `keep_se` paired SEs
                 (and by more than zero, so a tie never promotes unless `allow_tie`, which
                 only a relaxed gate may set);
  no-drop        no canary's primary metric fell by more than max(drop_se x SE, drop_abs);
                 waived on abstention canaries (irrelevance) when the baseline never calls a
                 tool: a score earned by never calling is no bar (their floors still hold);
  floor          a canary's primary metric stays at or above its absolute floor;
  anchor         an `anchored` canary's primary metric is not below the base model's by
                 more than the no-drop tolerance, paired over the items both evaluated
                 (opt-in; its detail warns when the base never calls a tool).
The thresholds are the run config's `GateSettings` as they are (defined and checked there).
`force` promotes anyway; the decision then says so and the report shows it. No I/O here.
"""
from __future__ import annotations

from dataclasses import dataclass

from .settings import GateSettings

from .stats import Paired, paired


@dataclass(frozen=True)
class Rule:
    name: str
    passed: bool
    detail: str              # the numbers that decided it, in words
    canary: str = ""
    metric: str = ""


@dataclass(frozen=True)
class Decision:
    promote: bool
    forced: bool             # --force was given (promote is then True whatever the rules say)
    rules: list[Rule]
    target: str              # "canary.metric"
    comparisons: dict[str, dict[str, Paired]]  # canary -> metric -> paired statistics
    thresholds: GateSettings

    @property
    def passed(self) -> bool:
        """Whether every rule passed (what the decision would be without --force)."""
        return all(r.passed for r in self.rules)

    def failures(self) -> list[Rule]:
        return [r for r in self.rules if not r.passed]

    def to_dict(self) -> dict:
        return {"promote": self.promote, "forced": self.forced, "passed": self.passed,
                "target": self.target, "thresholds": self.thresholds.to_dict(self.comparisons),
                "rules": [r.__dict__ for r in self.rules],
                "comparisons": {c: {m: p.to_dict() for m, p in ms.items()}
                                for c, ms in self.comparisons.items()}}


def split_target(target: str, suites: dict) -> tuple[str, str]:
    """`"multi_turn.success"` or `"multi_turn"` (its primary metric) -> (canary, metric)."""
    canary, _, metric = target.partition(".")
    if not metric:
        metric = suites.get(canary, {}).get("primary", "")
    return canary, metric


def abstention_canary(name: str, suite: dict) -> bool:
    """A canary whose right answer is no call (built-in or BFCL irrelevance)."""
    return suite.get("scorer") == "irrelevance" or name.endswith("irrelevance")


NEVER_CALLS = 0.05  # a call on at most this share of call-side items: "never calls"


def never_calls(suites: dict) -> bool:
    """Whether a model (almost) never calls a tool where one fits: `has_call` at most
    NEVER_CALLS on every call-side canary it was evaluated on (single_turn, BFCL files);
    False when none carries the metric."""
    seen = [s["metrics"]["has_call"] for s in suites.values()
            if "has_call" in s.get("metrics", {})]
    return bool(seen) and max(seen) <= NEVER_CALLS


def _fmt(x: float) -> str:
    return f"{x:+.3f}"


def decide(candidate: dict, baseline: dict, thresholds: GateSettings, target: str,
           force: bool = False, anchor: dict | None = None) -> Decision:
    """Apply every rule; promote when all pass (or when forced). `anchor` is the base
    model's evaluation, which the `anchored` canaries are held to."""
    cand, base = candidate.get("suites", {}), baseline.get("suites", {})
    rules: list[Rule] = []
    comparisons: dict[str, dict[str, Paired]] = {}

    kc, kb = candidate.get("k"), baseline.get("k")
    if kc != kb:
        rules.append(Rule("same-items", False, f"samples per item differ (baseline k={kb}, "
                          f"candidate k={kc}): pass@k and averages are not comparable"))
    for name in sorted(base):
        if name not in cand:
            rules.append(Rule("same-items", False, f"{name}: evaluated for the baseline but "
                              f"missing from the candidate", canary=name))
            continue
        hb, hc = base[name].get("hash"), cand[name].get("hash")
        if hb != hc:
            rules.append(Rule("same-items", False, f"{name}: suite hash differs (baseline "
                              f"{str(hb)[:12]}, candidate {str(hc)[:12]}); re-evaluate the "
                              f"baseline on this suite version", canary=name))
            continue
        rules.append(Rule("same-items", True, f"{name}: {base[name].get('n_items', 0)} items, "
                          f"hash {str(hb)[:12]}", canary=name))
        items_c, items_b = cand[name].get("items", {}), base[name].get("items", {})
        metrics = [m for m in cand[name].get("metrics", {}) if m in base[name].get("metrics", {})]
        comparisons[name] = {  # a metric over the items that carry it (many_tools: one side)
            m: paired({i: v[m] for i, v in items_c.items() if m in v},
                      {i: v[m] for i, v in items_b.items() if m in v})
            for m in metrics}

    t_canary, t_metric = split_target(target, cand)
    full_target = f"{t_canary}.{t_metric}"
    p = comparisons.get(t_canary, {}).get(t_metric)
    if p is None:
        rules.append(Rule("target", False, f"target {target!r} was not compared (canaries: "
                          f"{', '.join(sorted(comparisons)) or 'none'})",
                          canary=t_canary, metric=t_metric))
    else:
        need = thresholds.keep_se * p.se
        positive = p.delta >= 0 if thresholds.allow_tie else p.delta > 0
        ok = positive and p.delta >= need
        sign = ">= 0 (ties allowed: relaxed)" if thresholds.allow_tie else "> 0"
        rules.append(Rule("target", ok, f"{full_target}: delta {_fmt(p.delta)} (baseline "
                          f"{p.baseline:.3f} -> {p.candidate:.3f}), needs {sign} and >= "
                          f"{thresholds.keep_se:g} x SE {p.se:.3f} = {need:.3f}; "
                          f"{p.wins} wins / {p.losses} losses over {p.n} items"
                          + (f" ({p.note})" if p.note else ""),
                          canary=t_canary, metric=t_metric))

    abstainer = never_calls(base)
    for name in sorted(comparisons):
        primary = cand[name].get("primary", "")
        p = comparisons[name].get(primary)
        if p is None:
            rules.append(Rule("no-drop", False, f"{name}: primary metric {primary!r} missing",
                              canary=name, metric=primary))
            continue
        tol = max(thresholds.drop_se * p.se, thresholds.tolerance_abs(name))
        if abstainer and abstention_canary(name, cand[name]):
            rules.append(Rule("no-drop", True, f"{name}.{primary}: delta {_fmt(p.delta)}; "
                              "waived: the baseline never calls a tool (has_call <= "
                              f"{NEVER_CALLS}), so its abstention score is no bar (floors "
                              "still apply)",
                              canary=name, metric=primary))
        else:
            rules.append(Rule("no-drop", p.delta >= -tol,
                              f"{name}.{primary}: delta {_fmt(p.delta)}, tolerance -{tol:.3f} "
                              f"= max({thresholds.drop_se:g} x SE {p.se:.3f}, abs "
                              f"{thresholds.tolerance_abs(name):.3f})",
                              canary=name, metric=primary))
        if name in thresholds.floors:
            floor = float(thresholds.floors[name])
            rules.append(Rule("floor", p.candidate >= floor,
                              f"{name}.{primary}: candidate {p.candidate:.3f} vs floor "
                              f"{floor:.3f}", canary=name, metric=primary))

    unknown = sorted(set(thresholds.floors) - set(comparisons))
    for name in unknown:
        rules.append(Rule("floor", False, f"{name}: a floor is set but the canary was not "
                          f"evaluated", canary=name))

    rules += anchor_rules(cand, (anchor or {}).get("suites", {}), thresholds)
    passed = all(r.passed for r in rules)
    return Decision(promote=passed or force, forced=force, rules=rules, target=full_target,
                    comparisons=comparisons, thresholds=thresholds)


def anchor_rules(cand: dict, base: dict, thresholds: GateSettings) -> list[Rule]:
    """One `anchor` rule per anchored canary: the candidate against the base model's suite
    (`base`), paired over their common items (suites are prefix-stable), with the no-drop
    tolerance max(drop_se x SE, drop_abs). The previous promoted model's no-drop rule alone
    lets drops within noise accumulate round after round."""
    rules = []
    warn = ("; warning: the base model never calls a tool, so this score comes from "
            "abstention" if never_calls(base) else "")
    for name in thresholds.anchored:
        primary = cand.get(name, {}).get("primary", "")
        p = paired_common(cand.get(name, {}), base.get(name, {}), primary)
        if p is None:
            rules.append(Rule("anchor", False, f"{name}: no base-model evaluation to hold it "
                              "to (evals/base of this run): run the round in a run directory "
                              "that evaluated the base, or drop it from gate.anchored",
                              canary=name, metric=primary))
            continue
        tol = max(thresholds.drop_se * p.se, thresholds.tolerance_abs(name))
        rules.append(Rule("anchor", p.delta >= -tol,
                          f"{name}.{primary} vs the base model: {p.baseline:.3f} -> "
                          f"{p.candidate:.3f}, delta {_fmt(p.delta)}, tolerance -{tol:.3f} = "
                          f"max({thresholds.drop_se:g} x SE {p.se:.3f}, abs "
                          f"{thresholds.tolerance_abs(name):.3f}); {p.wins} wins / {p.losses} "
                          f"losses over {p.n} items{warn}", canary=name, metric=primary))
    return rules


def paired_common(cand: dict, base: dict, metric: str) -> Paired | None:
    """`metric` of two evaluations of one suite, paired over the items both hold (suites
    are prefix-stable, so these are the smaller suite's); None when they share none."""
    common = sorted(set(cand.get("items", {})) & set(base.get("items", {})))
    if not common:
        return None
    return paired({i: cand["items"][i][metric] for i in common},
                  {i: base["items"][i][metric] for i in common})
