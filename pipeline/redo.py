"""`pipeline run RUN --round N --redo STEP`: drop one step of a round, every step after it
and every later round, with their outputs, so the next run redoes them from the kept steps.

What is dropped:
  - round N: STEP and every step recorded done after it (state.json keeps steps in the order
    they finished), their files, and the round's verdict and time breakdown; a step that feeds
    training also takes the round's training outputs, gate and export with it, whether or not
    they were recorded done (a gate evaluation left on disk would otherwise be reused for a
    new candidate);
  - every later round: its state and its directory;
  - promotions of round N or later: promoted.json goes back to its last entry before round N
    (the base model when there is none), and `export/` to that round's export.

The drop is crash-safe: the plan (what to delete, what promoted.json becomes) is written into
state.json in the same atomic write that drops the steps, as `redo`; the files are deleted
after it and the plan cleared last. Any `pipeline run` on the directory first finishes a plan
it finds (`finish_redo`), so a redo killed at any moment finishes on a plain resume. Each
redo is also kept in state.json's `redos` list (round, step, overrides, when).
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from engine.runstore import RunStore

TRAIN_OUTPUTS = ("adapter", "model", "checkpoints", "train_log.jsonl", "loss.png",
                 "grpo_log.jsonl", "grpo.png")
TAIL = ("gate", "export")  # steps after training, each with a folder of the same name


class RedoError(ValueError):
    """The redo cannot be done as asked (no such round or step); the message says why."""


def match_step(done: list[str], step: str, round_no: int) -> str:
    """The recorded step `step` names: itself, or the first `step-<n>` (an iteration's)."""
    for name in done:
        if name == step or name.startswith(step + "-"):
            return name
    raise RedoError(f"round {round_no} has no step {step!r} recorded done; its steps: "
                    f"{', '.join(done) or 'none (the round has not run)'}")


def step_outputs(step: str) -> list[str]:
    """Files and folders of a round directory that `step` writes."""
    if step.startswith("train"):
        it = step[len("train-"):]
        return [f"iter-{it}"] if it else list(TRAIN_OUTPUTS)
    if step in TAIL:
        return [step]
    return [f"{step}.jsonl", f"{step}.json"] + (["teacher_dropped.txt"] if step == "teacher"
                                                else [])


def plan(store: RunStore, round_no: int, step: str) -> dict:
    """What redoing `step` of `round_no` drops (see the module doc): the state after the
    drop (`state`), paths relative to the run root (`remove`), promoted.json's new record
    (`promoted`: None for the base) when it changes (`rollback`)."""
    state = store.state()
    rounds = state["rounds"]
    r = rounds.get(str(round_no))
    if not r:
        raise RedoError(f"round {round_no} has not run in {store.root}; nothing to redo")
    done = list(r.get("done", {}))
    first = match_step(done, step, round_no)
    dropped = done[done.index(first):]
    rdir = round_dir(store, round_no)
    names = [*dropped]
    kept_steps = [s for s in done if s not in dropped]
    if not set(dropped) <= set(TAIL):  # the candidate changes: training, gate, export go too
        names += [*TAIL] + ([] if "train" in kept_steps else ["train"])  # done or partial
        names += [p.name for p in rdir.glob("iter-*")
                  if "train-" + p.name[len("iter-"):] not in kept_steps]
    kept_files = {out for s in kept_steps for out in step_outputs(s)}
    names += [f.stem for f in rdir.glob("*.jsonl")  # outputs of steps never recorded done
              if f.stem not in kept_steps and f.name not in kept_files]
    remove = sorted({str((rdir / out).relative_to(store.root)) for s in names
                     for out in ([s] if s.startswith("iter-") else step_outputs(s))})
    later = [n for n in rounds if int(n) > round_no]
    remove += sorted(str(d.relative_to(store.root)) for n in sorted(later, key=int)
                     for d in store.root.glob(f"round-{n}-*"))
    kept = {**r, "done": {s: v for s, v in r["done"].items() if s not in dropped}}
    for key in ("status", "wall_s", "reasons", "stats", "timing"):
        kept.pop(key, None)
    new_rounds = {n: v for n, v in rounds.items() if int(n) < round_no}
    new_rounds[str(round_no)] = kept
    promoted = store.promoted()
    history = (promoted or {}).get("history", [])
    keep = [h for h in history if h["round"] < round_no]
    out = {"round": round_no, "step": first, "dropped": dropped,
           "later_rounds": sorted(map(int, later)), "remove": remove,
           "rollback": len(keep) != len(history),
           "promoted": {**keep[-1], "history": keep} if keep else None}
    return {"state": {**state, "rounds": new_rounds}, "redo": out}


def round_dir(store: RunStore, round_no: int) -> Path:
    """The existing directory of round `round_no` (`round-<n>-<name>`)."""
    found = sorted(store.root.glob(f"round-{round_no}-*"))
    if not found:
        raise RedoError(f"{store.root}: no directory round-{round_no}-*")
    return found[0]


def start_redo(store: RunStore, round_no: int, step: str, overrides: list[str],
               quant: str, system: str | None) -> dict:
    """Drop `step` of `round_no` and everything after it (the caller holds the run's lock);
    returns the plan carried out."""
    p = plan(store, round_no, step)
    redo = {**p["redo"], "overrides": list(overrides), "quant": quant, "system": system,
            "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    state = p["state"]
    state["redos"] = state.get("redos", []) + [{k: redo[k] for k in (
        "round", "step", "dropped", "later_rounds", "rollback", "overrides", "at")}]
    store.write_json(store.state_path, {**state, "redo": redo})
    finish_redo(store)
    return redo


def finish_redo(store: RunStore) -> dict | None:
    """Carry out a redo plan found in state.json (a redo killed part way), then clear it.
    Idempotent; returns the plan, None when there was none."""
    state = store.state()
    redo = state.get("redo")
    if not redo:
        return None
    if redo["rollback"]:
        roll_back_promotion(store, redo["promoted"], redo["quant"], redo["system"])
    for rel in redo["remove"]:
        path = store.root / rel
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        for tmp in path.parent.glob(path.name + ".tmp*") if path.parent.exists() else []:
            shutil.rmtree(tmp) if tmp.is_dir() else tmp.unlink()
    state.pop("redo")
    store.write_json(store.state_path, state)
    return redo


def roll_back_promotion(store: RunStore, record: dict | None, quant: str,
                        system: str | None) -> None:
    """promoted.json back to `record` (None: nothing promoted, the base model) and the run's
    published export to that round's export (none for the base)."""
    from data.jsonl import write_text_atomic
    from export.publish import publish_export
    published = store.root / "export"
    if record is None:
        store.promoted_path.unlink(missing_ok=True)
        shutil.rmtree(published, ignore_errors=True)
        return
    write_text_atomic(store.promoted_path, json.dumps(record, indent=2))
    src = round_dir(store, record["round"]) / "export"
    if (src / f"model-{quant}.gguf").exists():
        publish_export(store, src, quant, system)
    else:
        shutil.rmtree(published, ignore_errors=True)
