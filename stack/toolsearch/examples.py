"""Example requests: what a user would write when they need a tool, in a user's words.

A tool's description is its author's words ("Get the current on-call users"); requests come in
users' words ("who is on call this week?"), and a request that shares no word with the description
is found by neither BM25 nor a small embedder. So the lane asks its own model, once per tool
definition and style, for a few requests that tool would answer, and indexes them with the tool.
Two styles: direct requests ("who is on call for payments?"), indexed as BM25 words and one vector
each, and situations that never name the task ("prod is down, who do I wake up?"), as vectors
only (retrieval.py). They are kept in `$LANE_HOME/tool_examples.json` by the hash of the
definition, so a changed tool gets new ones and an unchanged one is never asked about again.

This module only words the question and reads the answer; the shim's background writer
(examples_writer.py) asks the model when it is idle, and `lane examples` asks from the shell.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Iterator

from .retrieval import ToolDoc

log = logging.getLogger("lane.toolsearch")

REQUESTS_PER_STYLE = 3
# Three short requests fit in 60 tokens; a model that drifts into prose is cut off there.
EXAMPLE_MAX_TOKENS = 60
DESCRIPTION_WORDS = 60
PARAMETER_NAMES = 8
MIN_REQUEST_WORDS = 3
MAX_REQUEST_CHARS = 200


@dataclass(frozen=True)
class RequestStyle:
    """One way to ask for requests: an instruction and two worked answers. Two worked answers show
    the form (short lines, no preamble, no numbering) better than any instruction does for a 1.5B
    model; neither tool is in any catalog the lane ships or measures."""

    name: str
    instruction: str
    shots: tuple[tuple[ToolDoc, str], ...]


_WEATHER = ToolDoc("weather__get_forecast", "Returns the hourly and daily forecast for a location.",
                   {"properties": {"latitude": {}, "longitude": {}, "days": {}}})
_MERGE = ToolDoc("crm__merge_contacts",
                 "Merges two contact records into one, keeping the primary record's fields.",
                 {"properties": {"primary_id": {}, "duplicate_id": {}}})
# What a user asks for when they know what they want done.
DIRECT = RequestStyle("direct", (
    "You help people find software tools. Given one tool, write three different requests a busy "
    "user might type to an assistant when they need exactly this tool. Write them the way people "
    "talk about their work, with everyday words and concrete made-up details, not the tool's own "
    "wording. Each under 15 words. One request per line, nothing else."), (
    (_WEATHER, "will it rain in Lyon this weekend?\ndo I need a jacket tomorrow morning\n"
               "how hot does it get in Madrid on Friday"),
    (_MERGE, "Anna Berg is in the CRM twice, combine them\nclean up the duplicate entry for ACME's "
             "buyer\nthese two people are the same person, make them one")))
# What a user says when they only know their situation: the words furthest from the description.
SITUATION = RequestStyle("situation", (
    "You help people find software tools. Given one tool, write three messages a user might send "
    "to an assistant when they need this tool, but without knowing it exists: each one describes "
    "their situation or goal in their own words, with concrete made-up details, and never names "
    "the tool or repeats its wording. Each under 15 words. One message per line, nothing else."), (
    (_WEATHER, "I land in Lyon on Saturday, should I pack an umbrella?\nplanning a picnic Sunday "
               "afternoon, is it going to be nice out\nare the roads going to be icy when I drive "
               "at 7am"),
    (_MERGE, "we keep emailing Anna Berg twice because she's in there two times\nACME's buyer shows "
             "up under two entries, sort that out\nTom Li and T. Li are the same customer")))
# Asked in this order: every tool gets direct requests before any gets situations.
STYLES = (DIRECT, SITUATION)
_LIST_MARK = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")


def definition_key(doc: ToolDoc) -> str:
    """Names the tool definition the examples were written for: name, description, parameters."""
    text = json.dumps([doc.name, doc.description, doc.parameters], sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def entry_key(doc: ToolDoc, style: RequestStyle) -> str:
    """The book's key for one style of requests of one definition (the first style's is the bare
    definition key, as in books written before there were two styles)."""
    return _styled(definition_key(doc), style)


def _styled(definition: str, style: RequestStyle) -> str:
    return definition if style == STYLES[0] else f"{definition}/{style.name}"


def request_messages(doc: ToolDoc, style: RequestStyle = DIRECT) -> list[dict[str, str]]:
    """The chat that asks a model for one style of example requests of one tool."""
    messages = [{"role": "system", "content": style.instruction}]
    for shot, answer in style.shots:
        messages += [{"role": "user", "content": _tool_card(shot)},
                     {"role": "assistant", "content": answer}]
    return [*messages, {"role": "user", "content": _tool_card(doc)}]


def _tool_card(doc: ToolDoc) -> str:
    description = " ".join(doc.description.split()[:DESCRIPTION_WORDS]) or "(no description)"
    parameters = ", ".join(doc.parameter_names[:PARAMETER_NAMES]) or "none"
    return f"Tool: {doc.name}\nWhat it does: {description}\nParameters: {parameters}"


def parse_requests(text: str) -> tuple[str, ...]:
    """The requests in a model's answer: one a line, list marks and quotes stripped; a line that
    introduces the list ("Sure, here are three requests:") or is too short to be one is dropped."""
    requests: list[str] = []
    for request in answer_lines(text):
        if (len(request.split()) < MIN_REQUEST_WORDS or request.endswith(":")
                or len(request) > MAX_REQUEST_CHARS or request in requests):
            continue
        requests.append(request)
        if len(requests) == REQUESTS_PER_STYLE:
            break
    return tuple(requests)


def answer_lines(text: str) -> Iterator[str]:
    """The lines of a model's listed answer, list marks and quotes stripped (a small model numbers
    or bullets them however it was shown not to)."""
    for line in text.splitlines():
        yield _LIST_MARK.sub("", line).strip().strip("\"'`").strip()


class ExampleBook:
    """Example requests by definition key, in one JSON file (`{key: {"tool", "style",
    "model", "requests"}}`), written whole and atomically. `version` grows with every change, so a
    catalog built from it knows when to index again. Two processes may share the file (`lane
    examples` beside a running shim): each write merges what is on disk first, and `refresh`
    takes up another process's writes. Unreadable files start an empty book (the examples are
    written again) rather than stopping tool search."""

    def __init__(self, path: Path | None):
        self.path = path
        self.version = 0
        self._lock = threading.Lock()
        self._seen = self._stamp()
        self._entries: dict[str, dict[str, Any]] = self._read()

    def _stamp(self) -> tuple[int, int] | None:
        try:
            status = self.path.stat() if self.path else None
        except OSError:
            return None
        return (status.st_mtime_ns, status.st_size) if status else None

    def refresh(self) -> None:
        """Reads the file again if another process has changed it since."""
        stamp = self._stamp()
        if stamp is None or stamp == self._seen:
            return
        with self._lock:
            self._seen = stamp
            self._entries = {**self._entries, **self._read()}
            self.version += 1

    def _read(self) -> dict[str, dict[str, Any]]:
        if self.path is None or not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            log.warning("example requests in %s unreadable, writing them again: %s", self.path, exc)
            return {}
        if not isinstance(data, dict):
            return {}
        return {key: entry for key, entry in data.items()
                if isinstance(entry, dict) and isinstance(entry.get("requests"), list)}

    def __len__(self) -> int:
        return len(self._entries)

    def requests_for(self, doc: ToolDoc, style: RequestStyle) -> tuple[str, ...]:
        return self._requests(entry_key(doc, style))

    def _requests(self, key: str) -> tuple[str, ...]:
        entry = self._entries.get(key)
        return tuple(r for r in entry["requests"] if isinstance(r, str)) if entry else ()

    def with_examples(self, docs: Iterable[ToolDoc]) -> list[ToolDoc]:
        """The docs, each carrying the requests the book has for it."""
        keyed = [(doc, definition_key(doc)) for doc in docs]  # one hash per definition
        return [replace(doc, examples=self._requests(_styled(key, DIRECT)),
                        situations=self._requests(_styled(key, SITUATION))) for doc, key in keyed]

    def missing(self, docs: Iterable[ToolDoc]) -> list[tuple[ToolDoc, RequestStyle]]:
        """What is still to ask: every doc's first style before any doc's second (an entry with
        no usable request counts: a model that answered nothing useful is not asked again)."""
        keyed = [(doc, definition_key(doc)) for doc in docs]  # one hash per definition
        return [(doc, style) for style in STYLES for doc, key in keyed
                if _styled(key, style) not in self._entries]

    def add(self, doc: ToolDoc, style: RequestStyle, requests: Iterable[str], model: str) -> None:
        entry = {"tool": doc.name, "style": style.name, "model": model, "requests": list(requests)}
        with self._lock:
            self._entries = {**self._entries, **self._read(), entry_key(doc, style): entry}
            self.version += 1
            self._write()

    def _write(self) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps(self._entries, indent=1, ensure_ascii=False),
                                 encoding="utf-8")
            os.replace(temporary, self.path)
            self._seen = self._stamp()
        except OSError as exc:  # a read-only home keeps the examples for this process only
            log.info("example requests not written to %s: %s", self.path, exc)
