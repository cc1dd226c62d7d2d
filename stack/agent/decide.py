"""The lane asks its model, as a constrained choice, which tool a request needs next.

A 1.5B model given a dozen tools and an open reply often answers from its own head: it "saves"
a note without calling memory, states the machine's Python version, or says it ran a tool. The
words of a request do not tell the lane which tool it needs ("shell" is not "terminal", "jot
down" is not "memory"), but the model understands them. So each step of a turn (agent/loop.py)
begins with a short question whose reply a grammar holds to `{"next": NAME}` with NAME one of the
offered tools or "answer": the model's understanding decides, not a word list, and it cannot
reply with anything else. The question holds the notes the lane keeps, the request, what ran in
this turn with its result, and the tools in one line each, so it is small and its instruction is a
cached prefix.
"""

from __future__ import annotations

import json
import math
from typing import Any, Collection, Sequence

from ..toolsearch.catalog import one_line
from .llm_client import LlmClient, ModelReply
from .prompt import turn_facts
from .situation import situation

ANSWER = "answer"
DECIDE_MAX_TOKENS = 24
# The agent's decision lists at most this many hidden tools (tool search's best for the request).
# On the everyday tuning, seen and fresh files, of the 33 turns whose tool is a hidden one it
# ranked first for 21, second for 11 and nowhere for 1 (a third only ever ranked an alternative
# the turn also accepts); each further line is ~25 tokens of the question every request, "hello"
# first, waits for. Proxy mode describes its best three (CLIENT_DESCRIBED).
DECIDE_HIDDEN = 2
# Proxy mode's decision describes this many of search's best hidden client tools (the others by
# name alone): the number its BFCL even-id measurements were made with.
CLIENT_DESCRIBED = 3
MAX_REQUEST_CHARS = 1500
RESULT_CHARS = 200
# Proxy mode's second look (fit_probability): where the decision said "answer", the best-matching
# client tool is called when the model's yes-probability that it does what the message asks is at
# least this. On 124 BFCL even-id decisions (docs/measurements.md) every simple_python request the
# decision answered scored 0.80-0.89, and 4 of the 23 irrelevance requests it answered 0.81-0.90.
FITS = 0.8
# Proxy mode (lever "doubt"): a client tool the decision picked whose fit is under this is weighed
# against the listing's other tools by their fit. Probed on ten requests in four languages against Claude Code's
# and Codex's tools (docs/measurements.md): right picks read 0.67-0.94, wrong ones 0.13-0.67; the
# two overlap, so the threshold only chooses which picks are weighed, the comparison decides.
DOUBTS = 0.7
FIT_DESCRIPTION_CHARS = 600
FIT_ALTERNATIVES = 20

INSTRUCTION = (
    "You decide the next step of an assistant that runs on the user's own computer. Its tools:\n"
    "{tools}\n\n"
    "Pick the one tool the user's request still needs, or \"answer\" when no tool is needed. "
    "Anything about this computer's files, folders, programs or the output of a command needs "
    "a tool; so do notes to keep for later, the time in another place, arithmetic and past "
    "conversations. Greetings, chat, general knowledge, what the user's notes already say and "
    "what the facts about now and this computer say need none. "
    "For example:\n"
    "{examples}"
)
# Proxy mode's question: a client's tools are not "this computer", and the agent's list of what
# needs a tool names the lane's own tools' jobs. On 76 BFCL even-id entries (decision alone,
# docs/measurements.md) this wording chose right 60 times against the agent's 58 (live_multiple
# 22/30 against 19/30, live_irrelevance 25/30 both, simple_python 13/16 against 14/16). Its examples
# for a client's tools are only the answers (no example tool is the client's), and a question the
# model can answer itself ("What key signature does C# major have?", with music_theory.key_signature
# offered) was answered: the sentence on answering yourself took simple_python from 37/45 to 42/45
# on even ids, live_irrelevance from 25/30 to 23/30, live_multiple 24/30 both. "What the
# conversation already says" joined the list after Hermes on the 1.5B model answered "What is my
# project codename?", two messages after the user gave it, by picking `memory` (a write).
CLIENT_INSTRUCTION = (
    "You decide the next step of an assistant. Its tools:\n"
    "{tools}\n\n"
    "Pick the one tool that does what the user's message asks, or \"answer\" when none of them does. "
    "When a tool does what the message asks, pick it even if you could answer yourself. "
    "Greetings, chat, general knowledge and what the conversation already says need none. "
    "For example:\n"
    "{examples}"
)
# How the question asks for the reply: (the whole line, the line narrowed to some tools, `{names}`).
# For a client's tools the slot is not a word (the agent's `TOOL` drew the first token of Claude
# Code's ToolSearch), and "answer" is named first: the option named first draws a 1.5B model's pick
# (BFCL even ids: irrelevance answered 8/24 with the tool first, 20/24 with "answer" first, at the
# cost of 2 of 24 tool requests; docs/measurements.md, session 31, with what it costs on the
# held-out toolsets).
AGENT_REPLY = ('Reply with {"next": TOOL} or {"next": "answer"}.',
               'Reply with {"next": TOOL} with TOOL one of {names} or {"next": "answer"}.')
CLIENT_REPLY = ('Reply with {"next": X}, where X is "answer" or one tool\'s name.',
                'Reply with {"next": X}, where X is "answer" or one of {names}.')
# Requests written for this prompt, none taken from a benchmark: (request, the tool that already
# ran for it, NOTED where the notes the lane keeps answer it, or "", the next step), each kept only
# when the lane has the tools it names; every tool the lane has but clarify is in one. Without one,
# a tool is rarely picked: on the everyday tuning file "dig out what the plumber's name was from
# our earlier conversations" chose todo, then search_files, never session_search; and a command
# given word for word in a language with no tool's name in it ("dans le shell", "en la consola",
# "auf der Kommandozeile") chose calculate for the six steps' `echo $((6*7))` (2026-11-29). A few
# are in other languages: every example was English, and a German "please remember …" picked todo.
NOTED = "(notes)"
# An example's message that follows another (BEFORE + that message): a follow-up means what the
# message before it asked. Seen on the 1.5B model, after a question about the time in Tokyo, "and
# what about Paris?" decided "answer"; "read it back to me" after a file was written, too.
BEFORE = "(before) "
EXAMPLES: tuple[tuple[str, str, str], ...] = (
    ("thanks, that's all for today!", "", ANSWER),
    ("what's in config.yaml?", "", "read_file"),
    ("my sister visits on Sunday and I wrote the menu in menu.md, what did I plan?", "read_file", ANSWER),
    ("which git version do I have?", "", "terminal"),
    ("what's inside the downloads folder?", "", "terminal"),
    ("run `uname -r` in a shell for me", "", "terminal"),
    ("¿cuánto espacio libre queda en el disco?", "", "terminal"),
    ("who painted the Mona Lisa?", "", ANSWER),
    ("save this for later: my locker code is 4410", "", "memory"),
    ("merk dir bitte, dass mein Zahnarzttermin am Freitag ist", "", "memory"),
    ("what's 18% of 250?", "", "calculate"),
    ("what's 18% of 250?", "calculate", ANSWER),
    ("what time is it in Lima?", "", "world_clock"),
    ("quelle heure est-il à Montréal ?", "", "world_clock"),
    ("and in Rome?", BEFORE + "what time is it in Lima?", "world_clock"),
    ("check how full the disk is and keep the number for later", "terminal", "memory"),
    ("make a file todo.md with the line 'buy milk'", "", "write_file"),
    ("what does it say now?", BEFORE + "add 'call mum' to todo.md", "read_file"),
    ("how many planets are in the solar system?", "", ANSWER),
    ("the call to the bank is done, mark it on my list", "", "todo"),
    ("how many strings does a violin have?", "", ANSWER),
    ("what did we say about the logo in an older chat of ours?", "", "session_search"),
    ("find every file here that talks about invoices", "", "search_files"),
    ("use python to sort 5, 2, 9 for me", "", "run_python"),
    ("grab https://example.org and tell me its title", "", "http_fetch"),
    ("grab https://example.org and tell me its title", "http_fetch", ANSWER),
    ("when it's 9:00 in Oslo, what hour is it in Denver?", "", "convert_timezone"),
    ("show me what's on my to-do list", "", "todo"),
    ("what was my locker code again?", NOTED, ANSWER),
    ("in plan.md, change Tuesday to Wednesday", "", "patch"),
    ("rename draft.txt to final.txt and move it into archive/", "", "terminal"),
)


def _aside(done: str) -> str:
    if done == NOTED:  # seen: "what was my bike lock code again" with the code in the notes chose todo
        return " (the notes hold it)"
    if done.startswith(BEFORE):
        return f' (after "{done.removeprefix(BEFORE)}")'
    return f" (after {done} ran)" if done else ""


def _needs(done: str) -> str:
    """The tool an example's aside names: notes are the memory tool's (no client has it); a
    message before names none."""
    return "memory" if done == NOTED else "" if done.startswith(BEFORE) else done


def listed_tool(name: str, description: str) -> str:
    """A tool's line in the question: its name and the first sentence of its description (the
    name alone when there is none)."""
    return f"- {name}: {one_line(description, 110)}" if description.strip() else f"- {name}"


def decide_opening(tools: Sequence[tuple[str, str]], known: Collection[str],
                   instruction: str = INSTRUCTION) -> list[dict[str, str]]:
    """The question's first message: the instruction (the agent's, or CLIENT_INSTRUCTION), the
    directly offered `tools` as (name, description) and the examples whose tool the lane has
    (`tools` or the hidden ones, `known`).
    The agent's is the same for every request of a profile, so the llm keeps it as a cached (and
    warmed) prefix; proxy mode's lists the client's tools in the request's own order instead
    (proxy_decide.decision_listing), trading that cache for a better choice."""
    listed = "\n".join(listed_tool(name, description) for name, description in tools)
    known = set(known) | {name for name, _ in tools}
    examples = "\n".join(
        f'"{request}"' + _aside(done) + f' -> {{"next": "{tool}"}}'
        for request, done, tool in EXAMPLES if {tool, _needs(done)} - {ANSWER, ""} <= known)
    return [{"role": "system", "content": instruction.format(tools=listed, examples=examples)}]


def decide_messages(request: str, tools: Sequence[tuple[str, str]], hidden: Sequence[tuple[str, str]],
                    ran: Sequence[tuple[str, str, str]], context: str = "", known: Collection[str] = (),
                    memory: str = "", instruction: str = INSTRUCTION, now: str = "",
                    reply: str = AGENT_REPLY[0]) -> list[dict[str, str]]:
    """The question: `now` the date, time and this computer's basics (situation.py, after the
    cached prefix), `tools` offered directly and `hidden` ones that search finds for this request,
    as (name, description); `ran` as (tool, status, result) of this turn; `context` what the
    conversation said before (short facts, not answers to imitate); `memory` the notes the lane
    keeps, so that a question they answer needs no tool."""
    question = _question(request, hidden, ran, context) + "\n\n" + reply
    if now:
        question = f"{now}\n\n{question}"
    if memory.strip():
        question = f"Notes the user asked you to keep:\n{memory.strip()[:MAX_REQUEST_CHARS]}\n\n{question}"
    return [*decide_opening(tools, known, instruction), {"role": "user", "content": question}]


def _question(request: str, hidden: Sequence[tuple[str, str]], ran: Sequence[tuple[str, str, str]],
              context: str) -> str:
    question = turn_facts(request[:MAX_REQUEST_CHARS], ran, context, result_chars=RESULT_CHARS)
    if hidden:
        question += "\n\nOther tools, found by a word search for this message (often none of them fits):\n" + "\n".join(
            listed_tool(name, description) for name, description in hidden)
    return question


FIT_SYSTEM = "You check whether a function is the right one for a user's message."
FIT_QUESTION = ("Function: {name}\nWhat it does: {description}\nParameters: {parameters}\n\n"
                "User's message: {request}\n\nIs calling this function what the message asks for? "
                "Reply yes or no.")


async def fit_probability(llm: LlmClient, request: str, name: str, description: str,
                          parameters: Sequence[str]) -> tuple[float | None, ModelReply]:
    """The model's probability that calling `name` is what the request asks for: one token,
    read from its logprobs (yes against no), with the reply to count and record; None where the
    service sends no logprobs. A question about one tool, apart from the decision's choice among
    all of them and "answer": asked so, the model separates a request a tool was made for from
    one no tool fits better than the choice does (the choice answers knowledge-shaped requests
    in words even when the one tool offered does exactly that)."""
    question = FIT_QUESTION.format(name=name, description=description.strip()[:FIT_DESCRIPTION_CHARS] or "(none)",
                                   parameters=", ".join(parameters) or "none",
                                   request=request[:MAX_REQUEST_CHARS])
    return await yes_probability(llm, [{"role": "system", "content": FIT_SYSTEM},
                                       {"role": "user", "content": question}])


# A reply in words, asked about as if it were one more tool (proxy mode, lever "doubt"): the fit
# question reads "yes" for nearly every tool a 1.5B model is asked about (no bar separates a request
# a tool was made for from thanks or a concept question), but asked the same question about
# answering in words it says how much less the message wants an action. Probed on the development
# toolsets file (client_toolsets_dev.json, 36 requests, 8 languages; docs/measurements.md): a reply
# in words fitted better than every listed tool for 6 of the 12 that need no tool, and for 1 of 24
# that need one.
WORDS_NAME = "reply_in_words"
WORDS_DESCRIPTION = ("Reply to the user in words, with no action: thanks, greetings, chat, opinions, and "
                     "questions answered from general knowledge.")

# Lever "claimed" (agent and proxy mode): a tool an answer reports as done, which did not run, is
# called where its fit is at least a reply in words' less this. The two yes-probabilities come from
# two questions asked apart, and a tool the request wants often reads within a few hundredths of a
# reply in words; in that band the answer's own report of the action (the model took the request
# for it) decides. Seen before this band (docs/measurements.md, sessions 39 and 42): words won by
# 0.00-0.05 for five requests to note or tick something off (memory 0.62 against 0.66 for "Würden
# Sie sich dann bitte merken, dass …") and by 0.01 for Claude Code's "Run the shell command … and
# tell me exactly what it prints" (Bash 0.66 against 0.67); every wrong call the lever made there
# had the tool ahead of words.
CLAIM_TIE = 0.05


def claim_holds(fit: float, words: float) -> bool:
    """Whether lever "claimed" calls the tool an answer reports: its fit against a reply in
    words', the tie (CLAIM_TIE) going to the action the answer reports."""
    return fit >= words - CLAIM_TIE


async def words_probability(llm: LlmClient, request: str) -> tuple[float | None, ModelReply]:
    """The model's probability that a reply in words is what `request` asks for, asked exactly as
    the fit of a tool is (fit_probability): comparable with a tool's fit, not with a fixed bar."""
    return await fit_probability(llm, request, WORDS_NAME, WORDS_DESCRIPTION, ["text"])


DECLINE_SYSTEM = "You check whether an assistant's reply to a user's message does what the message asks."
DECLINE_QUESTION = ("User's message: {request}\n\nThe assistant's reply: {reply}\n\nDoes the reply decline the "
                    "request, say it cannot do it, or tell the user how to do it themselves, instead of doing "
                    "it or answering it? Reply yes or no.")
# A reply the model gives at least this yes-probability of declining (or of telling the user how)
# is not passed on as the answer before the decision is asked again (proxy mode, lever "declined").
DECLINES = 0.5


async def decline_probability(llm: LlmClient, request: str, reply: str) -> tuple[float | None, ModelReply]:
    """The model's probability that `reply` declines `request` or tells the user how to do it
    themselves (a refusal, a how-to) rather than doing or answering it: one token's logprobs, in
    any language the two are written in; no word of the reply is matched."""
    question = DECLINE_QUESTION.format(request=request.strip()[:MAX_REQUEST_CHARS],
                                       reply=reply.strip()[:MAX_REQUEST_CHARS])
    return await yes_probability(llm, [{"role": "system", "content": DECLINE_SYSTEM},
                                       {"role": "user", "content": question}])


FAILED_SYSTEM = "You check whether a tool call succeeded."
FAILED_QUESTION = ("The tool {name} was called and returned:\n{result}\n\nDid the call fail (an error, a rejected "
                   "or missing argument) instead of doing its job? Reply yes or no.")
WORKED_QUESTION = ("The tool {name} was called and returned:\n{result}\n\nDid the call do its job (it returned "
                   "what was asked, or did what was asked)? Reply yes or no.")
# A client result whose "failed" yes-probability is at least this share of the two questions' yes
# (it failed, it did its job) lets the decision call that tool again (proxy mode, lever "failed").
FAILS = 0.5


async def failure_probability(llm: LlmClient, name: str,
                              result: str) -> tuple[float | None, tuple[ModelReply, ModelReply]]:
    """How much more the model reads `result` as a failure than as the call doing its job: its
    yes-probability to "did it fail?" as a share of that and its yes to "did it do its job?", two
    one-token questions, whatever language or shape the client's tool writes its errors in
    (Hermes's `{"error": "Unknown action 'None'. Use: add, replace, remove"}`); no word of it is
    matched. Asked only whether it failed, a 1.5B model said yes at 0.52-0.70 to 6 of 11
    results that had done their job (git status, a table's columns, numbered lines of a file) and
    the retry made the client run them again; the two questions together set all 11 apart from 8
    errors (docs/measurements.md). The replies, to count and record."""
    shown = result.strip()[:MAX_REQUEST_CHARS] or "(nothing)"
    failed, asked_failed = await yes_probability(llm, [{"role": "system", "content": FAILED_SYSTEM}, {
        "role": "user", "content": FAILED_QUESTION.format(name=name, result=shown)}])
    worked, asked_worked = await yes_probability(llm, [{"role": "system", "content": FAILED_SYSTEM}, {
        "role": "user", "content": WORKED_QUESTION.format(name=name, result=shown)}])
    both = None if failed is None or worked is None or failed + worked == 0 else failed / (failed + worked)
    return both, (asked_failed, asked_worked)


async def yes_probability(llm: LlmClient, messages: list[dict[str, str]]) -> tuple[float | None, ModelReply]:
    """The model's probability of "yes" against "no" as its one-token reply to a yes/no question,
    read from the first token's logprobs; None where the service sends no logprobs."""
    reply = await llm.chat(messages, [], max_tokens=1, temperature=0.0, top_logprobs=FIT_ALTERNATIVES)
    if not reply.logprobs:
        return None, reply
    mass = {"yes": 0.0, "no": 0.0}
    for token, logprob in reply.logprobs[0].items():
        if token.strip().lower() in mass:
            mass[token.strip().lower()] += math.exp(logprob)
    total = mass["yes"] + mass["no"]
    return (mass["yes"] / total if total else None), reply


def decision_schema(names: list[str]) -> dict[str, Any]:
    """The only replies the grammar admits."""
    return {"type": "object", "properties": {"next": {"enum": [*names, ANSWER]}},
            "required": ["next"]}


def parse_decision(content: str, names: list[str]) -> str | None:
    """The tool the reply picked; None for "answer" or a reply that is not a decision."""
    try:
        value = json.loads(content.strip())
    except json.JSONDecodeError:
        return None
    picked = value.get("next") if isinstance(value, dict) else None
    return picked if isinstance(picked, str) and picked in names else None


async def ask_decision(llm: LlmClient, request: str, tools: Sequence[tuple[str, str]],
                       hidden: Sequence[tuple[str, str]], ran: Sequence[tuple[str, str, str]],
                       context: str = "", known: Collection[str] = (),
                       choices: Sequence[str] | None = None, memory: str = "",
                       instruction: str = INSTRUCTION,
                       reply: tuple[str, str] = AGENT_REPLY) -> ModelReply:
    """One greedy, grammar-bound model call; the caller reads it with parse_decision. `choices`
    narrows the tools the grammar admits (all of `tools` and `hidden` when None); `reply` is how
    the reply is asked for, whole or narrowed to `choices` (CLIENT_REPLY for a client's tools)."""
    names = list(choices) if choices is not None else [name for name, _ in [*tools, *hidden]]
    line = reply[0] if choices is None else reply[1].replace("{names}", ", ".join(names))
    messages = decide_messages(request, tools, hidden, ran, context, known, memory, instruction, situation(), line)
    return await _asked(llm, messages, names)


async def _asked(llm: LlmClient, messages: list[dict[str, str]], names: list[str]) -> ModelReply:
    return await llm.chat(messages, [], max_tokens=DECIDE_MAX_TOKENS, temperature=0.0,
                          response_schema=decision_schema(names))
