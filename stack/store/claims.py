"""What a model's words claim: tool names it mentions and tool calls it wrote as text.

Only used to *describe* claims; a claim never makes a step pass. The store decides what ran; these
patterns find what the model said ran (or wrote as a call) so the check and the trace page can show
the difference. It lives beside the store, not in check/, because both read stored messages with
it and api/ may not import check/.
"""

from __future__ import annotations

import re
from typing import Iterable

# Tools of every lane (DESIGN.md): the core families and the three bridges. Tools seen in the store
# (MCP tools, deferred built-ins) are added by the caller.
BUILTIN_TOOLS = frozenset({
    "memory", "terminal", "session_search", "read_file", "write_file", "search_files", "patch",
    "todo", "clarify", "tool_search", "tool_describe", "tool_call",
})

# Everyday words that are also tool names: counted only when written as a name (backticks, a call,
# a JSON field, right after a verb of use: "I used calculate"), not when they are just English in
# a sentence. Seen: "I ran the Python script to calculate the average ..." after run_python ran,
# held back as a claim that `calculate` ran.
_PLAIN_WORDS = frozenset({"patch", "todo", "clarify", "calculate"})
_USED_AS_NAME = (r"\b(?:ran|run|used|called|invoked|executed)\s+(?:the\s+)?"
                 r"(?:[\w`-]+(?:,\s*(?:and\s+)?|\s+and\s+)){{0,4}}`?{}(?![\w-])")  # "used memory and calculate"

_TAGS = re.compile(r"<tool_call>|</tool_call>|<function[=>]|\[TOOL_CALLS\]|<\|python_tag\|>",
                   re.IGNORECASE)
_JSON_CALL = re.compile(
    r'"(?:name|tool|tool_name|function)"\s*:\s*"(?P<name>[A-Za-z_][\w.-]*)"\s*,\s*'
    r'"(?:arguments|parameters|args|input|params)"\s*:')
_FUNCTION_TAG = re.compile(r"<function=(?P<name>[A-Za-z_][\w.-]*)")
_CALL_EXPR = re.compile(r"\b(?P<name>[A-Za-z_][\w.]*)\(\s*(?:[A-Za-z_]\w*\s*=|[\"'{])")
_BACKTICKED = re.compile(r"`(?P<name>[a-z][a-z0-9_]*)`")
# A snake_case word that is a file's name ("shop_nov.csv", "/tmp/lane_home") is no tool's: seen, "I
# ran the Python script to sum the amount column in shop_nov.csv" held back as a claim that
# "shop_nov" ran.
_SNAKE = re.compile(r"(?<![\w/.-])(?P<name>[a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?![\w/-]|\.\w)")


def text_tool_calls(content: str, vocabulary: frozenset[str] = BUILTIN_TOOLS) -> list[str]:
    """Names of the tool calls written as text in content ('?' for a tag without a readable
    name); empty when the content holds nothing shaped like a call."""
    names = [m.group("name") for m in _JSON_CALL.finditer(content)]
    names += [m.group("name") for m in _FUNCTION_TAG.finditer(content)]
    names += [m.group("name") for m in _CALL_EXPR.finditer(content)
              if _looks_like_tool(m.group("name"), vocabulary)]
    if not names and _TAGS.search(content):
        names.append("?")
    return list(dict.fromkeys(names))


def unexecuted_text_calls(assistant_messages: Iterable[tuple[int, str]], ran_from_text: set[int],
                          vocabulary: frozenset[str] = BUILTIN_TOOLS) -> dict[int, list[str]]:
    """Per assistant message id, the tool calls written as text in its content that did not run:
    shaped like a call, in a message from which no salvaged call really ran (`ran_from_text`: ids
    of the messages with an origin='content' execution that really ran). Messages without such
    text are left out."""
    found: dict[int, list[str]] = {}
    for message_id, content in assistant_messages:
        if message_id not in ran_from_text:
            names = text_tool_calls(content, vocabulary)
            if names:
                found[message_id] = names
    return found


def named_tools(content: str, vocabulary: frozenset[str] = BUILTIN_TOOLS) -> set[str]:
    """Every tool name the text mentions: known tool names as words or in backticks, snake_case
    identifiers (how tool names are written; a summary has little other use for them), and the
    names in tool-call-shaped text."""
    names = {name for name in text_tool_calls(content, vocabulary) if name != "?"}
    names |= {m.group("name") for m in _BACKTICKED.finditer(content)
              if m.group("name") in vocabulary}
    names |= {m.group("name") for m in _SNAKE.finditer(content)}
    lowered = content.lower()
    # Only names the text contains are matched as words: a client's 4,096 tools were 4,096 regexes
    # compiled and run per answer, on the event loop.
    for name in (name for name in vocabulary if name.lower() in lowered):
        plain = rf"(?<![\w-]){re.escape(name.lower())}(?![\w-])"
        if re.search(_USED_AS_NAME.format(re.escape(name.lower())) if name in _PLAIN_WORDS else plain, lowered):
            names.add(name)
    return names


def _looks_like_tool(name: str, vocabulary: frozenset[str]) -> bool:
    return name in vocabulary or "_" in name.strip("_")



# What an answer may say a tool did. Each family: the tools whose ok execution backs the claim, and
# a past-tense (or "I'll remember"-style) statement of that kind of work. Capability talk ("I can
# save notes"), questions and negations are not claims (see _NOT_ASSERTED).
_DONE = r"(?:i(?:'ve| have)?|i've just|i just|we(?:'ve)?|has been|have been|was|were|is now|are now)"
_MADE = r"(?:written|wrote|created|saved|made|updated|edited|changed)"
_MOVED = r"(?:renamed|moved|copied|deleted)"
# A file is named as one ("the file", "the folder") or by its own name ("notes.txt").
_FILE = r"(?:file|folder|directory|[\w./-]+\.[a-z0-9]{1,5})"
# That a tool was tried (a command ran or answered, files were searched): claims a command that
# exited non-zero backs (`grep` finding nothing exits 1), where the families below say that work
# got done.
_RUNNERS = frozenset({"terminal", "run_python"})
_ATTEMPT_CLAIMS: tuple[tuple[frozenset[str], re.Pattern[str]], ...] = tuple(
    (frozenset(tools), re.compile(pattern, re.IGNORECASE)) for tools, pattern in (
        (_RUNNERS, rf"\b{_DONE}\s+(?:ran|run|executed|launched)\b[^\n]{{0,60}}"
                   r"\b(?:command|shell|terminal|script|code|snippet)\b"
                   r"|\bthe (?:command|script) (?:returned|printed|output)\b"
                   r"|\b(?:\w+ed|ran|got|found|did)\b[^\n]{0,60}\b(?:using|with|via|through|in) "
                   r"the (?:shell|terminal|command line)\b"),
        ({"search_files", "terminal", "run_python", "read_file"},
         rf"\b{_DONE}\s+(?:searched|looked)\b[^\n]{{0,30}}\b(?:files?|folders?|directory|workspace)\b"),
    ))
_FAMILY_CLAIMS: tuple[tuple[frozenset[str], re.Pattern[str]], ...] = tuple(
    (frozenset(tools), re.compile(pattern, re.IGNORECASE)) for tools, pattern in (
        ({"memory"}, rf"\b(?:{_DONE}\s+)?(?:saved|added|stored|noted|recorded|remembered|written|wrote|"
                     r"updated|kept|put)\b[^\n]{0,80}\b(?:memory|memories|long-term)\b"),
        ({"memory"}, r"\b(?:i'll|i will|i'm going to)\s+(?:remember|keep that in mind|make a note)\b"
                     r"|\b(?:i|i've|i have)\s+(?:noted (?:it|that|this|down)|made a note|taken note)\b"
                     r"|\b(?:got it|noted)[,.!]\s+(?:i'll|i will|i've)\b"),
        ({"memory", "todo", "write_file"}, r"\b(?:wrote|written|noted|jotted|put|taken)\s+(?:it\s+)?down\b"),
        # "I noted the information about the recipes_nov folder", "I saved the note as a new entry":
        # kept somewhere, says the answer, without saying where (seen with nothing run).
        # "I've noted the 9 December appointment for you." after todo ran is backed (it was held
        # to memory alone, and memory was forced to save it a second time); "I've noted it", "I made
        # a note" are memory's alone, as the everyday bench's judge reads them.
        ({"memory", "todo", "write_file", "patch", "terminal", "run_python"},
         r"\b(?:i|i've|i have|we've|we have)\s+(?:just\s+|now\s+|also\s+)?(?:noted|saved|stored|recorded|jotted)\b"),
        ({"write_file", "patch", "terminal", "run_python"},
         rf"\b{_DONE}\s+{_MADE}\b[^\n]{{0,60}}\b{_FILE}\b|\b{_FILE}\b[^\n]{{0,60}}\b{_DONE}\s+{_MADE}\b"),
        ({"terminal", "run_python"},  # no file tool renames, moves, copies or deletes a file
         rf"\b{_DONE}\s+{_MOVED}\b[^\n]{{0,60}}\b{_FILE}\b|\b{_FILE}\b[^\n]{{0,60}}\b{_DONE}\s+{_MOVED}\b"),
        ({"read_file", "terminal", "search_files", "run_python"},
         rf"\b{_DONE}\s+(?:read|opened|looked at|checked)\b[^\n]{{0,40}}\b{_FILE}\b"
         rf"|\b{_DONE}\s+(?:read|opened)\s+(?:it|them|this|that)\b|\bwhat i(?:'ve| have)? (?:read|opened)\b"
         r"|\bi(?:'ve| have)? (?:found|located|opened)\b[^\n]{0,40}?\band (?:read|opened)\b"
         r"|\bi(?:'ve| have)? read\b[^\n]{0,40}\bback\b"
         rf"|\b{_DONE}\s+found\b[^\n]{{0,60}}\bin\b[^\n]{{0,30}}\b{_FILE}\b"
         rf"|\b{_DONE}\s+(?:found|located)\s+(?:the|your|that|this)\s+{_FILE}\b"),
        ({"session_search"}, rf"\b{_DONE}\s+(?:searched|looked through|checked|gone through|went through)"
                             r"\b[^\n]{0,40}\b(?:sessions?|conversations?|chats?|history)\b"
                             rf"|\b{_DONE}\s+(?:found|seen|saw)\b[^\n]{{0,60}}\b(?:earlier|previous|past|old|other)\s+"
                             r"(?:sessions?|conversations?|chats?)\b"),
        ({"todo"}, rf"\b{_DONE}\s+(?:added|marked|created|updated|put|set)\b[^\n]{{0,50}}"
                   r"\b(?:to-?do|tasks?|checklist|list)\b"
                   rf"|\b{_DONE}\s+(?:marked|ticked|checked|crossed)\b[^\n]{{0,50}}"
                   r"\b(?:done|off|complete|completed|finished)\b"
                   r"|\b(?:is|are) now (?:done|complete|completed|finished|(?:ticked|checked|crossed) off)\b"
                   r"|\b(?:task|chore|errand|item)s?\b[^\n]{0,60}\b(?:is|are|has been|have been) "
                   r"(?:done|complete|completed|finished|(?:ticked|checked|crossed) off)\b"),
    ))
# Work done outside this computer ("I sent the page to her", "I've booked the table"): only a tool
# whose name says it does such work backs it; the built-in tools never do.
_OUTSIDE = re.compile(rf"\b{_DONE}\s+(?:just\s+)?(?:sent|emailed|e-mailed|mailed|messaged|texted|forwarded|"
                      r"posted|booked|ordered|paid|phoned|shared|notified|scheduled)\b", re.IGNORECASE)
_OUTSIDE_TOOL = re.compile(r"send|mail|message|text|sms|post|book|order|pay|share|notif|calendar|schedul",
                           re.IGNORECASE)
# A tool said to have been used or to have answered: "I ran the world_clock tool", "used memory and
# terminal", "the calculate tool returned", "the terminal printed".
_USE_VERB = re.compile(r"\b(?:ran|used|called|invoked|executed|tools? used)\b", re.IGNORECASE)
_ANSWERED = r"(?:returned|says|said|shows|showed|gave|reported|printed|output|found)"
_NAMED_TOOL = re.compile(r"\b(?:ran|used|called|invoked|executed)\s+(?:the\s+)?`?(?P<name>[A-Za-z_][\w.-]*)`?"
                         r"\s+(?:tool|function)\b", re.IGNORECASE)
# The tools of a claim that names none ("I used the tools"): any tool that ran backs it.
ANY_TOOL = frozenset({"*"})
_SOME_TOOLS = re.compile(r"\b(?:the|some|several|a few|these|those|my|both|all the|various|different)\s+"
                         r"(?:\w+\s+)?tools\b", re.IGNORECASE)
_NOT_ASSERTED = re.compile(r"\b(?:not|n't|never|no|unable|cannot|could|can|would|should|may|might|"
                           r"if|whether|try|want|wish|please|let me|shall)\b|\?\s*$", re.IGNORECASE)


def _stated(matches: Iterable[re.Match[str] | None]) -> bool:
    """Whether one of the matches (in a sentence) is stated: no negation or hedge before its end."""
    return any(m is not None and not _NOT_ASSERTED.search(m.string[:m.end()]) for m in matches)


def claimed_tools(content: str, vocabulary: frozenset[str] = BUILTIN_TOOLS) -> list[tuple[str, frozenset[str]]]:
    """What the answer says was done, as (sentence, the tools any one of which backs it): a tool
    named as used or as having answered ("I ran the world_clock tool", "I used memory and
    terminal", "the calculate tool returned"; a tool the lane does not have, "I ran the percentage
    tool", is a claim nothing backs), or a kind of work stated as done ("I added teal to my
    memory", "the file has been created"; "I sent it to her", which only a tool for sending
    backs). A question claims nothing, nor a statement negated, hedged or offered before it ends
    ("I can save notes", "I haven't run it"); a hedge after it does not unsay it ("I saved the
    recipe, so you can find it later" claims the save)."""
    return [(sentence, tools) for sentence, tools, _ in _claims(content, vocabulary)]


def _claims(content: str, vocabulary: frozenset[str]) -> list[tuple[str, frozenset[str], bool]]:
    """claimed_tools, each claim with whether it says work got done (a file written, moved, found,
    a note kept) rather than only that a tool ran or answered."""
    claims: list[tuple[str, frozenset[str], bool]] = []
    for raw in re.split(r"(?<=[.!?])\s+(?=[A-Z])|\n+", content):
        sentence = raw.strip()
        if not sentence or sentence.endswith("?"):
            continue
        named = {m.group("name") for m in _NAMED_TOOL.finditer(sentence) if _stated([m])}
        if _stated([_USE_VERB.search(sentence)]):  # a tool the lane does not have, named as used, backs nothing
            named |= {n for n in named_tools(sentence, vocabulary) if n in vocabulary or "_" in n}
            if not named and _stated([_SOME_TOOLS.search(sentence)]):  # "I used the tools"
                claims.append((sentence, ANY_TOOL, False))
        lowered = sentence.lower()
        for name in (name for name in vocabulary if name.lower() in lowered):  # not a regex per tool
            if _stated([re.search(rf"\bthe\s+`?{re.escape(name)}`?\s+(?:tool\s+|function\s+)?{_ANSWERED}\b",
                               sentence, re.IGNORECASE)]):
                named.add(name)
        claims += [(sentence, frozenset({name}), False) for name in sorted(named)]
        claims += [(sentence, tools, effect) for effect, families in ((False, _ATTEMPT_CLAIMS), (True, _FAMILY_CLAIMS))
                   for tools, pattern in families if _stated(pattern.finditer(sentence)) and not tools & named]
        if _stated(_OUTSIDE.finditer(sentence)):
            claims.append((sentence, frozenset(n for n in vocabulary if _OUTSIDE_TOOL.search(n)), True))
    return claims


def unbacked_claims(content: str, ran: set[str], vocabulary: frozenset[str] = BUILTIN_TOOLS,
                    unfinished: Iterable[str] = ()) -> list[tuple[str, frozenset[str]]]:
    """The claims of `content` that no tool in `ran` (those that ran ok) backs. The `unfinished`
    tools ran and failed at their work (a command that exited non-zero): they back a claim that
    they ran, not one that the work got done. Seen: `mv` exited 1 ("cannot stat"), and the answer
    was "I found the file 'invoice.txt' ... and moved it to the 'notes_fresh' folder."."""
    done = set(ran) - set(unfinished)
    return [(sentence, tools) for sentence, tools, effect in _claims(content, vocabulary)
            if not ((ran if tools == ANY_TOOL else tools & (done if effect else ran)))]
