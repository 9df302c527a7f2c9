"""Engine processes that must not outlive the pipeline process.

vLLM runs its engine core and workers as child processes. When the pipeline process dies
without closing the engine (the OOM killer, a segfault in a native library, SIGKILL), those
children are re-parented to init and keep their memory: measured, an orphaned vLLM-CPU engine
held 2.6 GB until killed by hand, and with it the next run's gate was OOM-killed. `guard`
starts a small watchdog process per engine. It polls the parent and, once the parent is gone,
kills the children that are still alive and still the same processes (same start time).
Closing the engine normally stops its watchdog.
"""
from __future__ import annotations

import os
import subprocess
import sys

import psutil

# argv: poll seconds, parent pid, then pid:create_time for each child to kill
_WATCH = """
import sys, time
import psutil
poll, parent = float(sys.argv[1]), int(sys.argv[2])
kids = [(int(p), float(t)) for p, t in (a.split(":") for a in sys.argv[3:])]
while True:
    time.sleep(poll)
    alive = []
    for pid, made in kids:
        try:
            proc = psutil.Process(pid)
            if abs(proc.create_time() - made) < 1e-3:
                alive.append(proc)
        except psutil.Error:
            pass
    if not alive:
        break
    if not psutil.pid_exists(parent) or psutil.Process(parent).status() == psutil.STATUS_ZOMBIE:
        for proc in alive:
            try:
                proc.kill()
            except psutil.Error:
                pass
        break
"""


def children() -> list[psutil.Process]:
    """This process's descendants now (an engine's processes right after it started)."""
    return psutil.Process().children(recursive=True)


def guard(procs: list[psutil.Process], poll_s: float = 2.0) -> subprocess.Popen | None:
    """A watchdog that kills `procs` if this process dies first; None when there are none.
    Stop it (`.kill()`) once the processes are shut down normally."""
    stamped = []
    for p in procs:
        try:
            stamped.append(f"{p.pid}:{p.create_time()}")
        except psutil.Error:
            pass
    if not stamped:
        return None
    return subprocess.Popen([sys.executable, "-c", _WATCH, str(poll_s), str(os.getpid()),
                             *stamped], start_new_session=True, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
