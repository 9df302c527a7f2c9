"""One sampler engine kept alive between steps that use the same weights.

A vLLM engine takes tens of seconds to start on a CPU. Consecutive steps often need the same
one: a round's baseline evaluation and its sampling run the same model, and a promoted
candidate evaluated at the gate is the model the next round samples. Inside `keep_engines()`
(the round loop holds one for the whole run) `backend_opener` hands out the engine it opened
last again when the backend, resolved model directory and options match; opening anything
else closes it first, so at most one engine lives at a time. `release_engine()` closes it
early: rounds call it before training, which needs the memory (an idle vLLM-CPU engine uses
almost no CPU, but holds its weights and KV cache; on a GPU its reserved share). Nothing after
training needs that engine: the loop evaluates a round's baseline before its recipe. Outside
`keep_engines()` every open starts an engine and closes it when its `with` block ends.

Every start is timed as the `engine_start` step of the running `engine.timing` timer, every
close as `engine_stop` (a vLLM engine takes seconds to shut its processes down), and every
hand-out of a kept engine is counted there as `engine_reuse`.
"""
from __future__ import annotations

import json
import logging
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from engine import timing

from .base import Backend

log = logging.getLogger("toolsmith")


def engine_key(backend: str, model: str | Path, options: dict) -> tuple[str, str, str]:
    """What makes two opens the same engine: backend, resolved model path, options."""
    return backend, str(Path(model).resolve()), json.dumps(options, sort_keys=True, default=str)


@dataclass
class EngineSlot:
    """The one kept engine, and the starts and reuses it saw (for the run's totals)."""
    backend: Backend | None = None
    key: tuple | None = None
    starts: list[dict] = field(default_factory=list)   # {"backend", "model", "seconds"}
    reuses: int = 0

    def get(self, key: tuple, start: Callable[[], Backend]) -> Backend:
        """The kept engine when `key` matches, else the kept one closed and `start()`ed anew."""
        if self.backend is not None and self.key == key:
            self.reuses += 1
            timing.count("engine_reuse")
            log.info("engine: reusing %s on %s", key[0], short_model(key[1]))
            return self.backend
        self.release()
        self.backend, self.key = timed_start(key, start, self.starts), key
        return self.backend

    def release(self) -> None:
        """Close the kept engine, if any (its memory is free afterwards)."""
        backend, self.backend, self.key = self.backend, None, None
        if backend is not None:
            stop(backend)


def timed_start(key: tuple, start: Callable[[], Backend], starts: list[dict] | None = None
                ) -> Backend:
    """`start()` timed as an `engine_start` step; appended to `starts` when given."""
    t0 = time.perf_counter()
    with timing.section("engine_start", backend=key[0], model=short_model(key[1])):
        backend = start()
    seconds = round(time.perf_counter() - t0, 2)
    if starts is not None:
        starts.append({"backend": key[0], "model": short_model(key[1]), "seconds": seconds})
    log.info("engine: %s started on %s in %.1f s", key[0], short_model(key[1]), seconds)
    return backend


def stop(backend: Backend) -> None:
    """`backend.close()`, timed as an `engine_stop` step."""
    with timing.section("engine_stop"):
        backend.close()


def short_model(path: str) -> str:
    """A model path as reports show it: its last two parts (`round-1-grounding/model`)."""
    return "/".join(Path(path).parts[-2:])


_slot: ContextVar[EngineSlot | None] = ContextVar("toolsmith_engine_slot", default=None)


@contextmanager
def keep_engines():
    """Within the block, `backend_opener` keeps its last engine alive for the next open of
    the same model; the kept engine is closed when the block ends (also on errors). Nested
    blocks share the outer one's slot."""
    outer = _slot.get()
    if outer is not None:
        yield outer
        return
    slot = EngineSlot()
    token = _slot.set(slot)
    try:
        yield slot
    finally:
        _slot.reset(token)
        slot.release()


def release_engine() -> None:
    """Close the kept engine now (before training: it needs the memory)."""
    slot = _slot.get()
    if slot is not None:
        slot.release()


@contextmanager
def open_engine(key: tuple, start: Callable[[], Backend]):
    """The backend for `key`: the kept one inside `keep_engines()`, else a fresh one closed
    on exit. An error inside the block closes a kept engine too (it may be broken)."""
    slot = _slot.get()
    if slot is None:
        backend = timed_start(key, start)
        try:
            yield backend
        finally:
            stop(backend)
        return
    backend = slot.get(key, start)
    try:
        yield backend
    except BaseException:
        slot.release()
        raise
