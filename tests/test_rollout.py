"""The rollout driver end to end: teacher-forced oracles (hand-written fake backend that replays
each task's oracle through the real stop semantics), limits, resume, and a real tiny model."""
from __future__ import annotations

import json

import pytest

from data.chatformat import IM_END, render
from data.envs.base import stable_int
from data.jsonl import read_all
from data.tasks import generate, make
from data.trajectory import Trajectory
from engine.models import load_tokenizer, tiny_model_dir
from engine.rollout import rollout, trajectory_id
from engine.sampling import make_backend
from engine.sampling.base import CALL_STOP, Completion, SamplingParams


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(tiny_model_dir(64))


class OracleReplay:
    """Fake backend: continues each prompt with the task's oracle conversation, stopping
    where a real engine would (after `</tool_call>`, or on `<|im_end|>`)."""
    name = "oracle-replay"

    def __init__(self, tasks, tok):
        self.tok, self.calls = tok, []
        self.full = [render(t.messages() + t.oracle, t.tools) for t in tasks]

    def generate(self, prompts, params, seeds, conversations=None):
        self.calls.append(len(prompts))
        out = []
        for p in prompts:
            full = next(f for f in self.full if f.startswith(p))
            rest = full[len(p):]
            i_call, i_end = rest.find(CALL_STOP), rest.find(IM_END)
            if i_call != -1 and i_call < i_end:
                text = rest[:i_call + len(CALL_STOP)]
                out.append(Completion(text, self.tok.encode(text), len(self.tok.encode(p)),
                                      "stop", CALL_STOP))
            else:
                text = rest[:i_end]
                ids = self.tok.encode(text) + [self.tok.convert_tokens_to_ids(IM_END)]
                out.append(Completion(text, ids, len(self.tok.encode(p)), "stop"))
        return out

    def close(self):
        pass


class Fixed:
    """Fake backend answering every prompt with the same text."""
    name = "fixed"

    def __init__(self, text, stop_reason=None):
        self.text, self.stop_reason = text, stop_reason

    def generate(self, prompts, params, seeds, conversations=None):
        return [Completion(self.text, [7] * 3, 10, "stop", self.stop_reason) for _ in prompts]

    def close(self):
        pass


def test_oracle_replay_succeeds_on_every_kind(tok):
    tasks = generate({"single": 2, "parallel": 2, "chained": 2, "recovery": 2,
                      "irrelevance": 1, "reasoning": 1})
    backend = OracleReplay(tasks, tok)
    trajs, stats = rollout(tasks, backend, k=2, round=3, progress=False, tokenizer=tok,
                           require_plan=True)
    assert len(trajs) == 20 and stats.trajectories == 20
    assert all(t.finish == "answer" for t in trajs), [t.finish for t in trajs]
    assert all(t.success for t in trajs), [t.verification.reasons for t in trajs if not t.success]
    for t in trajs:
        task = next(x for x in tasks if x.id == t.task_id)
        # the driver's messages are the task's prompt plus exactly the oracle's turns
        assert t.messages == task.messages() + task.oracle
        assert t.turns == sum(m["role"] == "assistant" for m in task.oracle)
        assert len(t.turn_token_ids) == t.turns
        assert all(ids[-1] == 2 for ids in t.turn_token_ids)  # ended on <|im_end|>
        assert t.completion_tokens == sum(map(len, t.turn_token_ids))
        assert t.id == trajectory_id(t.task_id, 3, t.sample) == f"{t.task_id}#3.{t.sample}"
        assert t.seed == stable_int(3, t.task_id, t.sample)
    # a parallel turn: two calls continued inside one assistant turn
    par = next(t for t in trajs if t.kind == "parallel")
    ptask = next(x for x in tasks if x.id == par.task_id)
    first = par.messages[len(ptask.messages())]
    assert first["content"].count("<tool_call>") >= 2
    assert stats.finish == {"answer": 20}
    assert stats.generated_tokens == sum(t.completion_tokens for t in trajs)
    assert stats.requests == sum(backend.calls) == sum(b["prompts"] for b in stats.batches)
    # every step of a batch is one backend call carrying all live trajectories
    assert backend.calls[0] == 20


def test_parse_error_turn_limit_and_call_cap():
    task = make("single", 0)
    bad = "<tool_call>\n{not json}\n</tool_call>"
    trajs, stats = rollout([task], Fixed(bad), progress=False)
    assert trajs[0].finish == "parse_error"
    assert trajs[0].parse_errors and "malformed JSON" in trajs[0].parse_errors[0]
    assert not trajs[0].success

    call = task.oracle[0]["content"].split("</think>")[-1].strip()  # one valid call
    loop = Fixed(call, stop_reason=None)
    trajs, _ = rollout([task], loop, progress=False)
    t = trajs[0]
    assert t.finish == "turn_limit" and t.turns == task.max_turns
    assert sum(m["role"] == "tool" for m in t.messages) == task.max_turns
    assert "no final answer (ended by turn_limit)" in t.verification.reasons

    # stopping on </tool_call> every time: the turn is continued one piece past the cap of
    # 4 calls, and the turn rule ends a turn with 5 calls as a parse error (nothing runs)
    capped = Fixed("\n" + call, stop_reason=CALL_STOP)
    trajs, stats = rollout([task], capped, progress=False, max_calls_per_turn=4)
    first = trajs[0].messages[len(task.messages())]["content"]
    assert first.count("<tool_call>") == 5 and stats.requests == 5
    assert trajs[0].finish == "parse_error"
    assert trajs[0].parse_errors == ["5 calls in one turn; at most 4 are allowed"]
    assert [m["role"] for m in trajs[0].messages[len(task.messages()):]] == ["assistant"]

    # a call that uses the turn's whole token budget ends the turn (no zero-token request)
    trajs, stats = rollout([task], capped, progress=False,
                           params=SamplingParams(max_tokens=3))  # Fixed gives 3 ids a piece
    assert trajs[0].finish == "turn_limit" and stats.requests == task.max_turns
    assert all(m["content"].count("<tool_call>") == 1
               for m in trajs[0].messages if m["role"] == "assistant")


def test_context_limit_ends_with_token_limit(tok):
    task = make("single", 1)
    prompt_len = len(tok.encode(render(task.messages(), task.tools, True)))
    trajs, _ = rollout([task], Fixed("hi"), progress=False, tokenizer=tok,
                       max_context_tokens=prompt_len)
    assert trajs[0].finish == "token_limit" and trajs[0].turns == 0


def test_resume_skips_done_rows_and_repairs_torn_tail(tmp_path, tok):
    tasks = generate({"single": 3})
    out = tmp_path / "rollouts.jsonl"
    first, _ = rollout(tasks[:2], OracleReplay(tasks, tok), k=2, out=out, progress=False,
                       batch_size=2)
    assert len(read_all(out, Trajectory)) == 4
    with open(out, "a") as f:  # a kill in the middle of writing a row
        f.write('{"id": "train-default-single-2#0.0", "task_id": "tr')
    backend = OracleReplay(tasks, tok)
    trajs, stats = rollout(tasks, backend, k=2, out=out, progress=False)
    assert stats.resumed == 4 and stats.trajectories == 2
    assert len(trajs) == 6
    rows = read_all(out, Trajectory)
    assert sorted((r.task_id, r.sample) for r in rows) == sorted(
        (t.id, s) for t in tasks for s in range(2))
    assert backend.calls[0] == 2  # only the missing task was sampled


@pytest.fixture(scope="module")
def hf():
    backend = make_backend("transformers", tiny_model_dir(64), dtype="float32")
    yield backend
    backend.close()


def test_transformers_end_to_end_and_reproducible(hf, tmp_path):
    tasks = generate({"single": 2, "chained": 1})
    params = SamplingParams(temperature=1.0, max_tokens=12)
    a, stats = rollout(tasks, hf, k=2, round=1, params=params, progress=False,
                       out=tmp_path / "a.jsonl")
    b, _ = rollout(tasks, hf, k=2, round=1, params=params, progress=False)
    assert [t.messages for t in a] == [t.messages for t in b]
    assert [t.turn_token_ids for t in a] == [t.turn_token_ids for t in b]
    # a random model rambles: every turn is cut by max_tokens
    assert {t.finish for t in a} <= {"token_limit", "answer", "parse_error"}
    assert all(t.verification is not None and not t.success for t in a)
    assert stats.generated_tokens == sum(t.completion_tokens for t in a) > 0
    assert 0.0 <= stats.driver_overhead_share < 0.5
    assert stats.batches and stats.batches[0]["prompts"] == 6
    assert json.dumps(stats.as_dict())  # plain data, ready for stats.json
    assert len(read_all(tmp_path / "a.jsonl", Trajectory)) == 6
    # another round samples differently
    c, _ = rollout(tasks, hf, k=2, round=2, params=params, progress=False)
    assert [t.messages for t in c] != [t.messages for t in a]
