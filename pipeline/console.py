"""What `pipeline` prints: the project's own lines (one per step, with counts and times) and the
sampling and training progress bars. The engines' logs (vLLM, transformers, TRL, PEFT, Triton,
Python warnings) still reach every other handler, so inside a round they go to its `log.txt`;
`-v` shows them on the console too; the process vLLM spawns for its engine writes its own
output to that log.txt as well (`engine.sampling.vllm_backend.child_output`). An engine's
errors always show. transformers logs through
its own handler (its records do not propagate): quiet, only its errors print.
"""
from __future__ import annotations

import logging
import os
import sys

ENGINES = ("vllm", "transformers", "trl", "peft", "accelerate", "datasets", "torch", "triton",
           "huggingface_hub", "httpx", "urllib3", "filelock", "py.warnings")
HANDLER = "toolsmith-console"


class ProjectLines(logging.Filter):
    """Passes the project's records and any logger's errors; drops the engines' chatter."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or not record.name.startswith(ENGINES)


def setup(verbose: bool = False) -> logging.Handler:
    """Log INFO and up to stderr, the engines' records only with `verbose`; returns the console
    handler. Call before vLLM or transformers is imported: both read the environment then."""
    if not verbose:
        # vLLM's records propagate to the root logger (and so to a round's log.txt) instead of
        # its own stdout handler; download and dataset-map bars stay off, training bars stay.
        os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
        # transformers' own handler prints its warnings straight to stderr (never to log.txt)
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    if not verbose:
        handler.addFilter(ProjectLines())
    handler.set_name(HANDLER)
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for old in [h for h in root.handlers if h.get_name() == HANDLER]:
        root.removeHandler(old)   # a second call (tests call main() often) replaces the first
    root.addHandler(handler)
    # vLLM imported before this call (by an earlier command, or a library that imports it)
    # has configured its own stdout handler and stopped propagation: undo both, so its
    # records reach log.txt and the console's filter like every engine's
    engine = logging.getLogger("vllm")
    for own in list(engine.handlers):
        engine.removeHandler(own)
    engine.propagate = True
    # and a level raised above INFO by whoever configured vLLM first would keep its INFO lines
    # out of log.txt: let them through, the console's filter decides what shows
    for logger in _tree("vllm"):
        if logger.level > logging.INFO:
            logger.setLevel(logging.NOTSET)
    logging.captureWarnings(True)   # warnings.warn -> the `py.warnings` logger
    return handler


def _tree(name: str) -> list[logging.Logger]:
    """The logger `name` and every logger made so far below it."""
    below = [logging.getLogger(n) for n, obj in logging.root.manager.loggerDict.items()
             if n.startswith(name + ".") and isinstance(obj, logging.Logger)]
    return [logging.getLogger(name)] + below
