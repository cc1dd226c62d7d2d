"""Judgement: the lane's model says of each candidate tool whether it does what the request asks.

Retrieval ranks by shared words and vectors, so a request full of details ("bump payments-worker to
6 copies, Black Friday") puts tools that share those details above the one that does the task,
and promotion offers the best hit only when something vouches for it. Asked to pick among ten
listed tools, a 1.5B model answers "1, 2, 3" whatever the list says (measured: R@5 unchanged). Asked
about one tool at a time, its probability of answering "yes" orders them well, and search adds it
to each candidate's score (retrieval.py). A service that sends no log-probabilities still gives the
answer itself: a plain yes or no, which helps less.

Every question about a request begins with the same instruction and request, and only the tool's
line differs, so a server that keeps its context (the lane's llm does) evaluates a few dozen new
tokens per candidate. This module words the question, asks it of whichever model it is given
(asking.py) and reads the answer; the agent asks at the start of a turn (agent/reading.py), and
`lane judge` (model_commands.py) for a file of queries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .asking import A, Answer, ChatModel
from .catalog import Catalog, one_line
from .retrieval import Hit

# How many of the best hits the agent judges. The right tool is among the first five for 84-94% of
# the single-tool requests of scripts/bench/data, among the first ten for 91-99%; but with five
# judged instead of ten, promotion (which the judgement is for) offers other tools for 10 of 786
# queries, and its shares of gold and of wrong-only offers move by under a point on every set
# (scripts/bench/promotion.py), for half the model calls. `lane judge --candidates` judges more.
JUDGE_CANDIDATES = 5
# The model's answer is one token; its alternatives carry the probability.
JUDGE_MAX_TOKENS = 1
JUDGE_ALTERNATIVES = 10
MAX_REQUEST_CHARS = 1500

INSTRUCTION = "You check whether a software tool can do what a user's message asks. Answer yes or no."
QUESTION = "Can this tool do what the message asks?"


def judged_hits(catalog: Catalog, request: str, restated: Sequence[str] = (),
                limit: int = JUDGE_CANDIDATES) -> list[Hit]:
    """The hits the agent asks its model about: the first JUDGE_CANDIDATES of the request's
    search, ranked with its restatement (`lane judge --candidates` asks about `limit`)."""
    return catalog.search(request, limit, restated)[0]


def judge_messages(request: str, name: str, description: str) -> list[dict[str, str]]:
    """The chat that asks whether one tool does what the request asks; the request comes before
    the tool, so that questions about one request share all but their last line."""
    server, _, bare = name.rpartition("__")
    label = f"{bare} ({server})" if server else bare
    text = (f"Message: {request.strip()[:MAX_REQUEST_CHARS]}\n\n"
            f"Tool: {label}: {one_line(description)}\n\n{QUESTION}")
    return [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": text}]


async def ask_judgement(model: ChatModel[A], request: str, name: str, description: str) -> A:
    """The model's answer whether one tool does what the request asks, with the first token's
    likeliest alternatives."""
    return await model.chat(judge_messages(request, name, description), [],
                            max_tokens=JUDGE_MAX_TOKENS, temperature=0.0,
                            top_logprobs=JUDGE_ALTERNATIVES)


async def judge_each(model: ChatModel[A], request: str, candidates: list[tuple[str, str]],
                     answers: list[tuple[str, A]]) -> None:
    """Asks about each (name, description) in turn, adding (name, answer) to `answers` as each
    comes, so a caller that stops waiting keeps the answers it had."""
    for name, description in candidates:
        answers.append((name, await ask_judgement(model, request, name, description)))


def judgement(answer: Answer) -> float | None:
    """The yes-probability of a judgement's answer (None: the model said neither)."""
    return yes_probability(answer.content, answer.logprobs[0] if answer.logprobs else None)


def yes_probability(answer: str, alternatives: Mapping[str, float] | None = None) -> float | None:
    """How likely the model's answer is "yes" rather than "no": from the first token's
    log-probabilities when the service sent them, else 1 or 0 by the answer's first word; None
    when the answer is neither."""
    if alternatives:
        yes = _mass(alternatives, "yes")
        no = _mass(alternatives, "no")
        if yes + no > 0:
            return yes / (yes + no)
    words = answer.strip().lower().split()
    first = words[0].strip(".,!:;\"'") if words else ""
    return {"yes": 1.0, "no": 0.0}.get(first)


def _mass(alternatives: Mapping[str, float], word: str) -> float:
    return sum(math.exp(logprob) for token, logprob in alternatives.items()
               if token.strip().lower() == word)
