"""Engine processes die with the pipeline process (`engine.sampling.orphans`)."""
import os
import signal
import subprocess
import sys
import time

import psutil

# a stand-in for the pipeline process: it starts a long-lived child (the engine), guards
# it, prints both pids, then waits to be killed
PARENT = """
import subprocess, sys, time
from engine.sampling import orphans
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
dog = orphans.guard(orphans.children(), poll_s=0.2)
print(child.pid, dog.pid, flush=True)
time.sleep(120)
"""


def wait_gone(pid: int, seconds: float) -> bool:
    end = time.time() + seconds
    while time.time() < end:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.1)
    return False


def test_a_killed_parent_takes_its_engine_with_it():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
    child, dog = map(int, parent.stdout.readline().split())
    try:
        time.sleep(0.5)
        assert psutil.pid_exists(child) and psutil.pid_exists(dog)
        os.kill(parent.pid, signal.SIGKILL)          # no cleanup runs in the parent
        parent.wait()
        assert wait_gone(child, 10), "the orphaned child outlived its parent"
        assert wait_gone(dog, 10)
    finally:
        for pid in (child, dog):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_live_parent_keeps_its_engine_and_no_guard_without_children():
    from engine.sampling import orphans
    assert orphans.guard([]) is None
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    dog = orphans.guard([psutil.Process(child.pid)], poll_s=0.1)
    try:
        time.sleep(0.6)
        assert child.poll() is None and dog.poll() is None     # parent alive: nothing killed
        child.kill()
        child.wait()
        assert dog.wait(timeout=5) == 0                       # its child gone: it stops too
    finally:
        child.kill()
        dog.kill()
