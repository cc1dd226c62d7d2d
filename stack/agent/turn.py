"""One turn as plain data: what it asked, what ran, what it cost, and the exception that ends it.

The agent loop (loop.py), the answer check (answers.py) and proxy mode (proxy*.py) share these, so
a turn's accounting is written once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..tools.base import ToolContext
from ..tools.execute import Outcome
from ..toolsearch.surface import Profile
from .english import beside, index_text, is_named
from .ledger import TurnLedger
from .llm_client import ModelReply
from .tasks import task_count

# A forced call's arguments under its schema's grammar (the agent's steps, proxy mode's decided
# calls): measured on the 1.5B model, it sometimes writes one string value until the cap (1,024
# digits of an "expression", 140 s on two cores).
FORCED_CALL_MAX_TOKENS = 512

@dataclass
class TurnResult:
    session_id: str
    content: str
    finish_reason: str  # stop | length | clarify | iteration_limit | repeated_call | model_call_budget
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    model_calls: int = 0
    peak_prompt_tokens: int = 0
    tools_executed: list[str] = field(default_factory=list)


class TurnEnded(Exception):
    """Ends a turn. `content` is the answer; `lane_written` when the lane, not the model, wrote it
    (the model's own answer is already stored with its model call); `held` why the model's answer
    was not passed on, where that is why the lane wrote it."""

    def __init__(self, content: str, reason: str, *, lane_written: bool = True, held: tuple[str, ...] = ()):
        super().__init__(reason)
        self.content, self.reason, self.lane_written, self.held = content, reason, lane_written, held


class ReadsRequest:
    """What the agent's turn and proxy mode's request read of the user's message the same way:
    its words (`query`) and, where the user wrote in another language, the model's English
    rendering of them (`english`, english.py)."""

    query: str
    english: str

    @property
    def indexed(self) -> str:
        """What the tool index ranks tools for: the English rendering, else the user's words."""
        return index_text(self.query, self.english)

    @property
    def shown(self) -> str:
        """The request as a decision or fit question reads it: the words, the rendering after them."""
        return beside(self.query, self.english)

    @property
    def tasks(self) -> int:
        """How many tasks the request holds (tasks.task_count, of both texts)."""
        return task_count(self.query, self.english)

    def names(self, tool: str) -> bool:
        """Whether the user's words, or their rendering, name the tool."""
        return is_named(tool, self.query, self.english)


@dataclass
class Turn(ReadsRequest):
    result: TurnResult
    query: str
    profile: Profile
    cap: int
    temperature: float | None
    ctx: ToolContext
    ledger: TurnLedger = field(default_factory=TurnLedger)
    force: str | None = None  # the tool the next model call must call (after a correction)
    outcomes: list[Outcome] = field(default_factory=list)
    steps_ran_out: bool = False  # every step of settings.max_iterations was taken
    unmade: str | None = None  # the tool the last forced reply was to call and did not
    english: str = ""  # the request in English where the user wrote in another language (english.py)


def count(turn: TurnResult, reply: ModelReply) -> None:
    turn.model_calls += 1
    turn.prompt_tokens += reply.prompt_tokens
    turn.completion_tokens += reply.completion_tokens
    turn.cached_tokens += reply.cached_tokens
    turn.peak_prompt_tokens = max(turn.peak_prompt_tokens, reply.prompt_tokens)
