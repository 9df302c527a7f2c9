"""The one turn rule: after each assistant turn, end the conversation or run its calls.

`advance(conversation, text, cut=...)` is pure: it parses the turn against the declared tools
and decides, in this order:
  cut (the turn hit its token budget or the context window) -> end "token_limit"
  any parse error (malformed JSON, unknown tool, schema-invalid arguments, unclosed tags)
  or more calls than `max_calls_per_turn`                    -> end "parse_error", run nothing
  no call                                                    -> end "answer"
  calls on the conversation's last allowed turn              -> run them, end "turn_limit"
  calls                                                      -> run them, continue
`take_turn(conversation, env, text, cut=...)` applies that step: the assistant message, each
call executed in the environment and its result appended as a tool message.

The sampler's driver (and so the gates and the export load check), GRPO's rollout function
and `pipeline chat` all go through `take_turn`, so a conversation ends the same way wherever
it is played.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .chatformat import Call, ParsedTurn, parse, schemas_of
from .environment import Environment

MAX_CALLS_PER_TURN = 4
FINISHES = ("answer", "turn_limit", "token_limit", "parse_error")


@dataclass
class Conversation:
    """The state a turn rule needs: messages, declared tools, limits, and how it ended."""
    messages: list[dict]
    tools: list[dict]
    max_turns: int = 6
    max_calls_per_turn: int = MAX_CALLS_PER_TURN
    turns: int = 0                 # assistant turns since the last user message
    calls: int = 0                 # calls executed in the whole conversation
    parse_errors: list[str] = field(default_factory=list)
    finish: str | None = None      # None while the conversation goes on

    @classmethod
    def for_task(cls, task, max_turns: int | None = None,
                 max_calls_per_turn: int = MAX_CALLS_PER_TURN) -> Conversation:
        """A task's opening messages; `max_turns` can only tighten the task's own limit."""
        limit = task.max_turns if max_turns is None else min(max_turns, task.max_turns)
        return cls(task.messages(), task.tools, limit, max_calls_per_turn)

    def user(self, text: str) -> None:
        """A new user message (chat): the turn count and the finish start over."""
        self.messages.append({"role": "user", "content": text})
        self.turns, self.finish = 0, None


@dataclass(frozen=True)
class Step:
    """What the rule decided for one assistant turn."""
    finish: str | None                     # None: the conversation continues
    calls: tuple[Call, ...] = ()           # calls to run (also on "turn_limit")
    errors: tuple[str, ...] = ()
    parsed: ParsedTurn | None = None       # None for a cut turn (not parsed)


def advance(conv: Conversation, text: str, *, cut: bool = False) -> Step:
    """Decide what follows the assistant turn `text`; changes nothing."""
    if conv.finish is not None:
        raise ValueError(f"the conversation already ended ({conv.finish})")
    if cut:
        return Step("token_limit")
    turn = parse(text, schemas=schemas_of(conv.tools or []))
    errors = list(turn.errors)
    if len(turn.calls) > conv.max_calls_per_turn:
        errors.append(f"{len(turn.calls)} calls in one turn; at most "
                      f"{conv.max_calls_per_turn} are allowed")
    if errors:
        return Step("parse_error", errors=tuple(errors), parsed=turn)
    if not turn.calls:
        return Step("answer", parsed=turn)
    last = conv.turns + 1 >= conv.max_turns
    return Step("turn_limit" if last else None, calls=tuple(turn.calls), parsed=turn)


def take_turn(conv: Conversation, env: Environment, text: str, *, cut: bool = False) -> Step:
    """Apply the rule to `conv`: append the turn (a cut turn only when it said something),
    run the calls in `env`, append their results, record errors and the finish."""
    step = advance(conv, text, cut=cut)
    if text or not cut:
        conv.messages.append({"role": "assistant", "content": text})
        conv.turns += 1
    conv.parse_errors += step.errors
    for call in step.calls:
        conv.messages.append(env.execute(call).message(call))
    conv.calls += len(step.calls)
    conv.finish = step.finish
    return step
