"""The request as the tool index reads it: the user's words, and an English rendering of them
where the user wrote in another language.

The index that ranks tools for a request (toolsearch: BM25 over English tool descriptions and an
English sentence embedder) reads English words. Asked in German to run `echo $((6*7))` "auf der
Kommandozeile" and keep the output "in Ihren Notizen", its best four were calculate, todo,
run_python and read_file: the decision was shown calculate as the tool "found for this message",
picked it, and the terminal never ran; "in Ihrem Gedächtnis hinterlegen" ranked no memory tool
among the candidates after session_search (the six steps in German, 2026-11-29). The model reads
German; so the lane has it write the request in English once, and the index reads both, the
decision sees the rendering beside the user's words, and nothing of the user's words is replaced:
what the user named, the parts of the request and every argument still come from what they wrote.

Which requests: those in which the English filler words the index itself drops
(toolsearch/data/stopwords.txt) are under FILLER_SHARE of the words. That list decides only
whether the index gets help, never what a tool does or whether an answer is passed on; an English
request it misses ("van's booked! tick that one off") costs one short model call, a foreign one it
misses is read as before.
"""

from __future__ import annotations

import re
from weakref import WeakKeyDictionary

from ..toolsearch.tokens import STOPWORDS, split_words
from .llm_client import LlmClient, ModelReply

# On the everyday and six-step files (scripts/bench/english_share.py prints the table: 348
# messages, English and seven other languages), two messages in another language of four words or
# more had at least this share ("Welche Tools liefen in dieser Sitzung wirklich?", 0.29), and two
# English ones less ("van's booked! tick that one off", "How many minutes has one day?").
FILLER_SHARE = 0.2
# Fewer words than this say too little to tell a language by ("ok", "danke!", "disk usage?").
MIN_WORDS = 4
RENDERING_MAX_TOKENS = 160
RENDERINGS = 256
# per model client: request -> rendering, oldest first
_RENDERED: WeakKeyDictionary[LlmClient, dict[str, str]] = WeakKeyDictionary()
_CODE = re.compile(r"`[^`]*`")

SYSTEM = ("You translate a user's message to an assistant into English. Keep commands, code, file "
          "names, numbers, names and quoted text exactly as written. Reply with the translation only.")


def filler_share(request: str) -> tuple[float, int]:
    """The share of the request's words (outside `code`) that are the index's English filler
    words, and how many words there are."""
    words = [w for w in split_words(_CODE.sub(" ", request)) if w.isalpha()]
    return (sum(w in STOPWORDS for w in words) / len(words) if words else 1.0), len(words)


def needs_rendering(request: str) -> bool:
    """Whether the index, which reads English, gets the request in English too."""
    share, words = filler_share(request)
    return words >= MIN_WORDS and share < FILLER_SHARE


async def rendered(llm: LlmClient, request: str) -> tuple[str, ModelReply | None]:
    """The model's English rendering of the request (greedy, a short cap: a rendering the length
    of the request, not an answer to it), "" where one was cut by the cap; with the model's reply
    to count and keep, None where the rendering was made before. A client resends its user's
    message with every result, so one message is rendered once (RENDERINGS kept)."""
    made = _RENDERED.setdefault(llm, {})
    if request in made:
        return made[request], None
    reply = await llm.chat([{"role": "system", "content": SYSTEM}, {"role": "user", "content": request}], [],
                           max_tokens=RENDERING_MAX_TOKENS, temperature=0.0)
    english = reply.content.strip() if reply.finish_reason != "length" else ""
    made[request] = english
    while len(made) > RENDERINGS:
        made.pop(next(iter(made)))
    return english, reply


def index_text(request: str, rendered: str) -> str:
    """What the index ranks tools for: the rendering where there is one (the user's words beside
    it would only add terms the index does not know), else the user's words."""
    return rendered.strip() or request


def beside(request: str, rendered: str) -> str:
    """The request as the decision reads it: the user's words, with the rendering after them."""
    rendered = rendered.strip()
    return f"{request}\n(In English: {rendered})" if rendered and rendered != request.strip() else request
