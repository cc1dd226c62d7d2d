"""A request's tasks: how many it holds, which are done, and what the next step's question reads.

One rule for the agent's tools (answers.decided_tool) and a client's (proxy_decide): a request
of N tasks (toolsearch.tokens.clauses, N >= 2) is done once N tools ran for it and none it names
is left; until then, the decision for the next step is shown the part of the request not done
yet, in the user's own words. Tool names are English words, so "guarda lo que imprima en la
memoria" names no tool: seen on the 1.5B model (the six steps in Spanish, 2026-11-29), after the
terminal had printed 42 the decision, reading the whole request, picked `calculate` and then
the rule answered; after session_search, `search_files`. The remaining part alone says what is
left in any language the clause split knows, without the lane matching a word of it.
"""

from __future__ import annotations

from ..toolsearch.tokens import clauses
from .english import beside

LEFT = "The part of the message not done yet: {left}"


def task_count(request: str, english: str = "") -> int:
    """How many tasks the request holds: 1 unless the clause split finds several; where the
    request has an English rendering (english.py), the rendering's count. The split knows the
    conjunctions of a few languages and the punctuation of more: the user's words in any other
    language are one task ("… in de terminal en zet wat eruit komt in je geheugen": after the
    terminal the turn was done and memory never ran, the six steps in Dutch, 2026-11-29), and
    German sets every relative clause off with commas ("… durchsuchen und danach die ID der
    Sitzung, in der sie vorkommt, in Ihrem Gedächtnis hinterlegen" split into four tasks, and
    after session_search and memory the decision was asked for a third and ran search_files);
    rendered, each holds two."""
    return max(1, len(clauses(english or request)))


def tasks_done(request: str, ran: int, named_left: bool, english: str = "") -> bool:
    """Whether `ran` tools (each for a different task) have done every task of the request and
    none it names is left (a tool it names is still called: "… in the terminal and then store it
    in memory" needs the terminal even after run_python printed the number)."""
    return ran >= task_count(request, english) and not named_left


def tasks_left(request: str, ran: int) -> str:
    """The request's tasks after the first `ran`, in its own words; "" where one task or none is
    left to name (nothing ran yet, a single task, or as many tools as tasks ran)."""
    parts = clauses(request)
    return " ".join(parts[ran:]) if 0 < ran < len(parts) else ""


def next_step_request(request: str, ran: int, english: str = "") -> str:
    """The request as the next step's decision reads it: the whole message (with its English
    rendering, english.py, where there is one), and the part of it not done yet once a tool ran
    for the first of several tasks."""
    left = tasks_left(request, ran)
    shown = beside(request, english)
    return f"{shown}\n\n{LEFT.format(left=left)}" if left else shown
