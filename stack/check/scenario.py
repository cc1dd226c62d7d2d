"""The check's prompts and the random markers that make a true answer tell-apart from a guess.

`{CODENAME}` and `{PHRASE}` are fresh per run: a model cannot know them from training or from an
earlier run, so a step that names them either used this run's store or was told in this session.
"""

from __future__ import annotations

import json
import secrets
import string
from dataclasses import dataclass
from pathlib import Path

DEFAULT_PROMPTS: tuple[str, ...] = (
    "What is 17 * 23? Reply with just the number.",
    "Please remember this for later: my project codename is {CODENAME}.",
    "What is my project codename?",
    "Use the terminal to run `echo $((6*7))`, then save the output to memory.",
    "Search my past sessions for the phrase {PHRASE} and save the id of the session that contains "
    "it to memory.",
    "Summarize what you did in this session and list every tool you actually used.",
)

# Step 7 (--with-deferred): a question only a deferred tool (the built-in clock) answers. The
# prompt asks for the bridge by name, because the lane may also promote the tool into the offered
# set, and a call made that way does not exercise tool_call; arm a has no bridge and calls directly.
DEFERRED_PROMPT = (
    "Use tool_search to find the tool that tells the current time, run it for UTC through "
    "tool_call (if you have no tool_search, call that tool directly), and tell me exactly what it "
    "returned."
)

SEED_PROMPT = "Note for later: the baseline marker of this project is {PHRASE}."

STEP_COUNT = len(DEFAULT_PROMPTS)

_WORDS = ("ORCHID", "TUNDRA", "LANTERN", "BASALT", "MERIDIAN", "QUASAR", "JUNIPER", "COBALT")
_ALPHABET = string.ascii_uppercase + string.digits


class PromptsError(ValueError):
    """The --prompts file cannot be used; the message says why."""


@dataclass(frozen=True)
class Markers:
    codename: str
    phrase: str

    @classmethod
    def fresh(cls) -> "Markers":
        token = "".join(secrets.choice(_ALPHABET) for _ in range(5))
        codename = f"{secrets.choice(_WORDS)}-{secrets.randbelow(9000) + 1000}"
        return cls(codename=codename, phrase=f"HELLO_{token}_BASELINE")

    def render(self, template: str) -> str:
        return (template.replace("{CODENAME}", self.codename)
                .replace("{PHRASE}", self.phrase))


def load_prompts(path: Path, *, with_deferred: bool) -> tuple[str, ...]:
    """Prompts from a file: a JSON list of strings, or one prompt per non-empty line ('#' starts a
    comment line). Six are needed, in the order of the default steps, because step N is judged by
    rule N; a seventh replaces the deferred step's prompt when --with-deferred is given."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PromptsError(f"cannot read prompts file {path}: {exc.strerror or exc}") from exc
    if text.lstrip().startswith("["):
        try:
            prompts = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PromptsError(f"prompts file {path} is not valid JSON: {exc}") from exc
        if not all(isinstance(p, str) and p.strip() for p in prompts):
            raise PromptsError(f"prompts file {path} must be a list of non-empty strings")
    else:
        prompts = [line.strip() for line in text.splitlines()
                   if line.strip() and not line.lstrip().startswith("#")]
    allowed = (STEP_COUNT, STEP_COUNT + 1) if with_deferred else (STEP_COUNT,)
    if len(prompts) not in allowed:
        wanted = " or ".join(str(n) for n in allowed)
        raise PromptsError(f"prompts file {path} has {len(prompts)} prompts; the check needs {wanted}")
    return tuple(prompts)


def step_prompts(custom: tuple[str, ...] | None, *, with_deferred: bool) -> tuple[str, ...]:
    prompts = custom or DEFAULT_PROMPTS
    if with_deferred and len(prompts) == STEP_COUNT:
        prompts = (*prompts, DEFERRED_PROMPT)
    return prompts[:STEP_COUNT + 1] if with_deferred else prompts[:STEP_COUNT]
