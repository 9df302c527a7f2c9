"""The run directory is the only state: step completion in state.json (atomic), a lock, paths.

A step is recorded done only after its outputs were renamed into place, so a killed run
resumes at the first step not recorded done and never reads a half-written file.
"""
from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

from data.jsonl import write_text_atomic

STEPS = ("tasks", "rollouts", "accepted", "train", "gate", "promote", "export")


class RunLocked(RuntimeError):
    pass


class RunStore:
    def __init__(self, root: str | Path):
        self.root = Path(root)  # made by the first write (a failed start leaves no directory)
        self._lock_fd: int | None = None

    # ---------------------------------------------------------------- lock
    def lock(self) -> None:
        """One writer per run directory: a second `pipeline run` gets a clear error."""
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / ".lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = path.read_text().strip() or "another process"
            os.close(fd)
            raise RunLocked(f"{self.root} is in use by {holder}; wait for it to finish or stop "
                            "it (two runs never write one directory)") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} since {time.strftime('%H:%M:%S')}".encode())
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    # ---------------------------------------------------------------- state
    @property
    def state_path(self) -> Path:
        return self.root / "state.json"

    def state(self) -> dict:
        if not self.state_path.exists():
            return {"rounds": {}}
        return json.loads(self.state_path.read_text())

    def _write_state(self, state: dict) -> None:
        write_text_atomic(self.state_path, json.dumps(state, indent=2))

    def done(self, round_no: int, step: str) -> bool:
        return step in self.state()["rounds"].get(str(round_no), {}).get("done", {})

    def mark(self, round_no: int, step: str, info: dict | None = None) -> None:
        state = self.state()
        r = state["rounds"].setdefault(str(round_no), {"done": {}})
        r["done"][step] = {"at": time.strftime("%Y-%m-%dT%H:%M:%S"), **(info or {})}
        self._write_state(state)

    def set_round_status(self, round_no: int, status: str, **info) -> None:
        state = self.state()
        r = state["rounds"].setdefault(str(round_no), {"done": {}})
        r.update(status=status, **info)
        self._write_state(state)

    def set_round_timing(self, round_no: int, timing: dict) -> None:
        """The round's time breakdown (`engine.timing.StepTimer.to_dict`), as `timing`."""
        state = self.state()
        state["rounds"].setdefault(str(round_no), {"done": {}})["timing"] = timing
        self._write_state(state)

    def round_timing(self, round_no: int) -> dict | None:
        return self.state()["rounds"].get(str(round_no), {}).get("timing")

    def round_status(self, round_no: int) -> str | None:
        return self.state()["rounds"].get(str(round_no), {}).get("status")

    def reset_round(self, round_no: int) -> None:
        state = self.state()
        state["rounds"].pop(str(round_no), None)
        self._write_state(state)

    # ---------------------------------------------------------------- paths
    def round_dir(self, round_no: int, name: str) -> Path:
        """`round-<n>-<name>` (underscores as dashes), created on first use."""
        d = self.root / f"round-{round_no}-{name.replace('_', '-')}"
        d.mkdir(parents=True, exist_ok=True)
        return d

    @property
    def promoted_path(self) -> Path:
        return self.root / "promoted.json"

    def promoted(self) -> dict | None:
        if not self.promoted_path.exists():
            return None
        return json.loads(self.promoted_path.read_text())

    def promote(self, info: dict) -> None:
        """Write `info` to promoted.json, appended to its history (once: redoing a promotion
        that a kill cut short adds no second entry)."""
        history = (self.promoted() or {}).get("history", [])
        if not history or history[-1] != info:
            history = history + [info]
        write_text_atomic(self.promoted_path,
                          json.dumps({**info, "history": history}, indent=2))

    # ------------------------------------------------------------ promotion
    # Promotion is one atomic step: the round's status and the promoted record land in
    # state.json in one write (the commit); promoted.json and the export mirror follow and
    # are redone from state.json by a resumed run when a kill fell in between.
    def commit_promotion(self, round_no: int, record: dict, export_dir: Path | None,
                         **info) -> None:
        state = self.state()
        r = state["rounds"].setdefault(str(round_no), {"done": {}})
        r.update(status="promoted", **info)
        state["promotion"] = {"record": record, "published": False,
                              "export_dir": str(export_dir) if export_dir else None}
        self._write_state(state)

    def pending_promotion(self) -> dict | None:
        """The committed promotion not yet published ({"record", "export_dir"}), or None."""
        p = self.state().get("promotion")
        return p if p and not p.get("published") else None

    def promotion_published(self) -> None:
        state = self.state()
        state["promotion"]["published"] = True
        self._write_state(state)

    # ---------------------------------------------------------------- machine
    def record_machine(self, machine: dict) -> None:
        """Add `machine` (`engine.machine.describe`) to the machines this run ran on, unless
        it is the last one recorded: seeded runs repeat on one CPU, not across CPUs."""
        state = self.state()
        seen = state.setdefault("machines", [])
        if not seen or {k: v for k, v in seen[-1].items() if k != "since"} != machine:
            seen.append({**machine, "since": time.strftime("%Y-%m-%dT%H:%M:%S")})
            self._write_state(state)

    def write_json(self, path: Path, obj) -> None:
        write_text_atomic(path, json.dumps(obj, indent=2, default=str))
