"""One turn rule everywhere: the same scripted model outputs played through the sampler's
driver, the gates' evaluation, GRPO's rollout function, `pipeline chat` and the export load
check end with the same messages, finish reasons and verifier scores."""
from __future__ import annotations

import pytest

from data.chatformat import IM_START, format_call, render
from data.environment import DomainEnvironment
from data.jsonl import read_all
from data.tasks import make
from data.trajectory import Trajectory
from data.turns import Conversation, advance, take_turn
from export.chat import Session
from export.loadcheck import check_tasks, load_check
from gates.canaries import Suite
from gates.evaluate import evaluate
from engine.models import tiny_model_dir
from engine.rollout import rollout
from engine.sampling.base import CALL_STOP, Completion, SamplingParams
from engine.training.grpo import TASK_KEY, make_rollout_func, verifier
from engine.training.settings import GRPOSettings
from engine.training.lora import training_tokenizer

ASSISTANT = f"{IM_START}assistant\n"


class Cut(str):
    """A scripted turn the model never finishes: the token limit cuts it."""


def _call(task, i=0):
    g = task.gold_calls[i]
    return format_call(g.name, g.arguments)


def _oracle_turns(task):
    return [m["content"] for m in task.oracle if m["role"] == "assistant"]


def scripted_cases():
    """(task, scripted assistant turns, expected finish), one per way a conversation ends."""
    t = [make(kind, i) for i, kind in enumerate(
        ["chained", "chained", "single", "single", "single", "chained"])]
    first = [_oracle_turns(x)[0] for x in t]
    return [
        (t[0], _oracle_turns(t[0]), "answer"),
        (t[1], [first[1], '<tool_call>\n{"name": broken\n</tool_call>'], "parse_error"),
        # a valid call beside an unknown tool: the whole turn is an error, nothing runs
        (t[2], [_call(t[2]) + "\n" + format_call("launch_rocket", {})], "parse_error"),
        (t[3], ["\n".join([_call(t[3])] * 5)], "parse_error"),                 # 5 > 4 calls
        (t[4], [_call(t[4])] * t[4].max_turns, "turn_limit"),
        (t[5], [first[5], Cut("The answer is")], "token_limit"),
    ]


class Script:
    """The scripted model: finds which task and which assistant turn a prompt asks for and
    continues it, stopping after `</tool_call>` as a real engine does."""

    def __init__(self, cases):
        self.cases = [(render(t.messages(), t.tools), turns) for t, turns, _ in cases]

    def continuation(self, prompt: str) -> tuple[str, bool, bool]:
        """(text, stopped on a call, cut by the token limit) for `prompt`."""
        head, turns = next((h, s) for h, s in self.cases if prompt.startswith(h))
        idx = prompt[len(head):].count(ASSISTANT) - 1
        done = prompt[prompt.rindex(ASSISTANT) + len(ASSISTANT):]
        turn = turns[idx] if idx < len(turns) else "I am done."
        rest = turn[len(done):]
        if CALL_STOP in rest:
            return rest[:rest.index(CALL_STOP) + len(CALL_STOP)], True, False
        return rest, False, isinstance(turn, Cut)


class ScriptedBackend:
    name = "scripted"

    def __init__(self, script: Script, tok):
        self.script, self.tok = script, tok

    def generate(self, prompts, params, seeds, conversations=None):
        out = []
        for p in prompts:
            text, call, cut = self.script.continuation(p)
            out.append(Completion(text, self.tok.encode(text), 0, "length" if cut else "stop",
                                  CALL_STOP if call else None))
        return out

    def close(self):
        pass


class ScriptedTrainer:
    """TRL's generation step for GRPO: one whole assistant turn per context (end-of-turn id
    appended unless the turn is cut)."""

    def __init__(self, script: Script, tok):
        self.script, self.tok = script, tok

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations):
        out = []
        for ids in prompt_ids:
            prompt = self.tok.decode(ids, skip_special_tokens=False)
            text, cut = "", False
            while True:  # whole turn: keep going past call stops
                piece, call, cut = self.script.continuation(prompt + text)
                text += piece
                if not call:
                    break
            ids = self.tok(text, add_special_tokens=False)["input_ids"]
            out.append(ids if cut else ids + [self.tok.eos_token_id])
        return out, None


@pytest.fixture(scope="module")
def tok():
    return training_tokenizer(tiny_model_dir(64))


PARAMS = SamplingParams(temperature=0.0, max_tokens=512)


def test_every_driver_plays_the_same_conversation(tok, tmp_path):
    cases = scripted_cases()
    tasks = [t for t, _, _ in cases]
    expected = [f for _, _, f in cases]
    script = Script(cases)

    # the sampler's driver
    sampled, _ = rollout(tasks, ScriptedBackend(script, tok), params=PARAMS, progress=False)
    assert [t.finish for t in sampled] == expected

    # the gates' evaluation (the same driver, scored by the canary scorer)
    suite = Suite("multi_turn", "test", "multi_turn", tasks)
    evaluate(ScriptedBackend(script, tok), [suite], k=1, params=PARAMS, out_dir=tmp_path / "ev")
    gated = {t.task_id: t for t in read_all(tmp_path / "ev" / "rollouts.jsonl", Trajectory)}

    # GRPO's rollout function
    grpo = make_rollout_func({t.id: t for t in tasks}, tok, GRPOSettings(max_turns=50))
    prompts = [[{**t.messages()[0], TASK_KEY: t.id}, *t.messages()[1:]] for t in tasks]
    out = grpo(prompts, ScriptedTrainer(script, tok))
    assert out["finish"] == expected
    rewards = verifier(None, task=[t.model_dump_json() for t in tasks],
                       messages=out["messages"], finish=out["finish"])

    for i, (task, traj) in enumerate(zip(tasks, sampled)):
        assert out["messages"][i] == traj.messages, task.id
        assert gated[task.id].messages == traj.messages
        assert gated[task.id].finish == traj.finish
        assert rewards[i] == gated[task.id].verification.score == traj.verification.score
        assert out["n_calls"][i] == sum(m["role"] == "tool" for m in traj.messages)

    # pipeline chat (a chat injects no faults: these tasks have none)
    for task, traj in zip(tasks, sampled):
        session = Session(ScriptedBackend(script, tok), task.tools, task.system, PARAMS,
                          out=lambda _: None, max_turns=task.max_turns)
        session.ask(task.prompt)
        assert session.messages == traj.messages, task.id
        assert session.conv.finish == traj.finish
    # what the finishes mean for the rows themselves
    by_finish = {t.finish: t for t in sampled}
    assert by_finish["answer"].success
    assert "5 calls in one turn; at most 4 are allowed" in sampled[3].parse_errors
    assert sum(m["role"] == "tool" for m in sampled[2].messages) == 0


def test_export_load_check_plays_by_the_same_rule(tok):
    tasks = check_tasks(2)
    cases = [(tasks[0], _oracle_turns(tasks[0]), "answer"),
             (tasks[1], ['<tool_call>\n{"name": 1}\n</tool_call>'], "parse_error")]
    script = Script(cases)
    expected, _ = rollout(tasks, ScriptedBackend(script, tok), params=PARAMS, progress=False)
    report = load_check("unused.gguf", "unused-model", items=2, max_tokens=512,
                        make_backend=lambda kind, model, **_: ScriptedBackend(script, tok))
    for item, traj in zip(report["per_item"], expected):
        assert item["hf"]["finish"] == item["gguf"]["finish"] == traj.finish
    assert [t.finish for t in expected] == ["answer", "parse_error"]
    assert report["agreement"] == 1.0 and report["passed"]


# ------------------------------------------------------------------------ the rule itself

def _conv(task, **kw):
    return Conversation.for_task(task, **kw)


def test_advance_is_pure_and_decides_in_order():
    task = make("chained", 2)
    conv = _conv(task)
    before = list(conv.messages)
    call = _call(task)
    assert advance(conv, call, cut=True).finish == "token_limit"
    step = advance(conv, call)
    assert step.finish is None and [c.name for c in step.calls] == [task.gold_calls[0].name]
    assert advance(conv, "The answer is 4.").finish == "answer"
    assert advance(conv, "<tool_call>\n{oops}\n</tool_call>").finish == "parse_error"
    assert advance(conv, "<think>\nunclosed plan").errors == ("unclosed <think> tag",)
    assert conv.messages == before and conv.turns == 0 and conv.finish is None
    conv.turns = task.max_turns - 1
    last = advance(conv, call)
    assert last.finish == "turn_limit" and len(last.calls) == 1  # the calls still run


def test_take_turn_runs_calls_and_records_typed_results():
    task = make("single", 6)
    conv, env = _conv(task), DomainEnvironment.for_task(task)
    step = take_turn(conv, env, _call(task))
    assert step.finish is None and conv.turns == 1 and conv.calls == 1
    tool_msg = conv.messages[-1]
    assert tool_msg["role"] == "tool" and tool_msg["ok"] is True
    assert tool_msg["name"] == task.gold_calls[0].name
    take_turn(conv, env, "Done.")
    assert conv.finish == "answer"
    with pytest.raises(ValueError, match="already ended"):
        advance(conv, "more")
    # a cut turn that said nothing adds no message
    quiet = _conv(task)
    take_turn(quiet, env, "", cut=True)
    assert quiet.finish == "token_limit" and quiet.messages == task.messages()


def test_turn_limit_can_only_tighten_and_chat_restarts_the_count():
    task = make("single", 1)
    assert _conv(task, max_turns=99).max_turns == task.max_turns
    assert _conv(task, max_turns=2).max_turns == 2
    conv = _conv(task, max_turns=1)
    take_turn(conv, DomainEnvironment.for_task(task), _call(task))
    assert conv.finish == "turn_limit"
    conv.user("And again?")
    assert conv.finish is None and conv.turns == 0
