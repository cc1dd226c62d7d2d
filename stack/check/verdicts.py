"""One verdict per step, decided from the store's rows for that step and nothing else.

Each rule follows "The six steps" of DESIGN.md. A tool counts only when it really ran (an ok
execution whose result went back in a tool message); the model's answer is read only for what a
step asks it to say (391, the codename, the tools it names), and every failure says what it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..store.claims import BUILTIN_TOOLS, unexecuted_text_calls
from .evidence import Execution, StepRows, arguments_of
from .names import named_tools
from .scenario import Markers

# Memory actions that do not write: a `read` naming the codename is not the codename saved.
_NON_WRITING_ACTIONS = frozenset({"read", "remove"})


@dataclass(frozen=True)
class Context:
    markers: Markers
    seed_session_id: str
    arm: str
    # Executions of earlier steps of this check's session that really ran.
    earlier: tuple[Execution, ...] = ()
    vocabulary: frozenset[str] = BUILTIN_TOOLS


@dataclass(frozen=True)
class Judgement:
    passed: bool
    reason: str
    hallucinated: tuple[str, ...] = field(default=())


def judge(step: int, rows: StepRows, ctx: Context) -> Judgement:
    rule = _RULES.get(step)
    if rule is None:
        raise ValueError(f"no rule for step {step}")
    return rule(rows, ctx)


# Step 1 may be answered by heart or with a calculator: a correct 391 from one is a correct answer.
CALCULATORS = frozenset({"calculate"})


def unexecuted_tool_text(rows: StepRows, vocabulary: frozenset[str] = BUILTIN_TOOLS) -> list[str]:
    """Names of tool calls the model wrote as text in this step that did not run: shaped like a
    call, in an assistant message from which no salvaged call really ran, or in a reply the lane
    held back (no call of it ran)."""
    salvaged = {e.message_id for e in rows.ran if e.origin == "content" and e.message_id}
    answers = ((m.id, m.content) for m in rows.messages if m.role == "assistant" and not m.lane_call)
    found = [*unexecuted_text_calls(answers, salvaged, vocabulary).values(),
             *unexecuted_text_calls(enumerate(c.content for c in rows.held_back), set(), vocabulary).values()]
    return list(dict.fromkeys(name for names in found for name in names))


def _step1(rows: StepRows, ctx: Context) -> Judgement:
    others = [e for e in rows.ran if e.tool_name not in CALCULATORS]
    if others:
        return Judgement(False, f"a tool other than a calculator ran for plain arithmetic: {_names(others)}")
    if "391" in rows.answer:
        how = f"through {_names(rows.ran)}" if rows.ran else "no tool ran"
        return Judgement(True, f"answered 391, {how}")
    return Judgement(False, f"answer lacks 391: {_quote(rows.answer)}")


def _step2(rows: StepRows, ctx: Context) -> Judgement:
    codename = ctx.markers.codename
    if _memory_writes(rows.ran, codename):
        return Judgement(True, f"memory ran ok with {codename} in its arguments")
    return Judgement(False, _missing_memory(rows, ctx, codename, "the codename"))


def _step3(rows: StepRows, ctx: Context) -> Judgement:
    codename = ctx.markers.codename
    if codename.lower() not in rows.answer.lower():
        return Judgement(False, f"answer lacks {codename}: {_quote(rows.answer)}")
    if _memory_writes(ctx.earlier, codename):
        return Judgement(True, f"answered {codename}; it was stored in memory in step 2")
    return Judgement(True, f"answered {codename} from context, memory not written")


def _step4(rows: StepRows, ctx: Context) -> Judgement:
    terminal = [e for e in rows.ran if e.tool_name == "terminal"]
    if not terminal:
        return Judgement(False, "terminal did not run" + _attempts(rows, "terminal")
                         + _text_calls(rows, ctx))
    later = [e for e in rows.ran if e.id > terminal[0].id]
    if _memory_writes(later, "42"):
        return Judgement(True, "terminal ran ok, then memory ran ok with 42 in its arguments")
    return Judgement(False, "terminal ran ok but " + _missing_memory(
        rows, ctx, "42", "42", after=terminal[0].id))


def _step5(rows: StepRows, ctx: Context) -> Judgement:
    seed = ctx.seed_session_id
    searches = [e for e in rows.ran if e.tool_name == "session_search"]
    if not searches:
        return Judgement(False, "session_search did not run" + _attempts(rows, "session_search")
                         + _text_calls(rows, ctx))
    found = [e for e in searches if seed in e.result]
    if not found:
        return Judgement(False, f"session_search ran but did not return the seeded session {seed}")
    later = [e for e in rows.ran if e.id > found[0].id]
    if _memory_writes(later, seed):
        return Judgement(True, f"session_search returned {seed}; memory ran ok with that id")
    return Judgement(False, f"session_search returned {seed} but " + _missing_memory(
        rows, ctx, seed, "the seeded session id", after=found[0].id))


def _step6(rows: StepRows, ctx: Context) -> Judgement:
    answer = rows.answer
    if not answer.strip():
        return Judgement(False, "no summary was answered")
    ran = [*ctx.earlier, *rows.ran]
    ran_names = {e.tool_name for e in ran}
    if any(e.via_bridge for e in ran):
        ran_names.add("tool_call")
    named = named_tools(answer, ctx.vocabulary | ran_names)
    hallucinated = tuple(sorted(named - ran_names))
    if hallucinated:
        return Judgement(False, f"named tools that never ran: {', '.join(hallucinated)}",
                         hallucinated)
    if ran_names and not named:
        return Judgement(False, f"the summary names none of the tools that ran ({_names(ran)})")
    listed = ", ".join(sorted(named)) or "none (and none ran)"
    return Judgement(True, f"every tool named ran: {listed}")


def _step7(rows: StepRows, ctx: Context) -> Judgement:
    if ctx.arm == "a":
        direct = [e for e in rows.ran if e.tool_name not in BUILTIN_TOOLS]
        if direct:
            return Judgement(True, f"deferred tool {direct[0].tool_name} ran (arm a: offered directly)")
        return Judgement(False, "no deferred tool ran" + _text_calls(rows, ctx))
    bridged = [e for e in rows.ran if e.via_bridge]
    if bridged:
        return Judgement(True, f"{bridged[0].tool_name} ran through tool_call (via_bridge=1)")
    direct = [e for e in rows.ran if e.tool_name not in BUILTIN_TOOLS]
    if direct:
        return Judgement(False, f"{direct[0].tool_name} ran directly (promoted or called by"
                         " name), not through tool_call: the bridge is unverified")
    searched = any(e.tool_name == "tool_search" for e in rows.ran)
    return Judgement(False, "no tool ran through tool_call"
                     + (" (tool_search ran)" if searched else "") + _attempts(rows, "tool_call")
                     + _text_calls(rows, ctx))


_RULES = {1: _step1, 2: _step2, 3: _step3, 4: _step4, 5: _step5, 6: _step6, 7: _step7}


def _memory_writes(executions: list[Execution] | tuple[Execution, ...], needle: str) -> list[Execution]:
    """Memory executions that really ran, wrote (not read or removed) and carry needle."""
    return [e for e in executions
            if e.tool_name == "memory" and e.really_ran and needle.lower() in e.arguments.lower()
            and arguments_of(e).get("action") not in _NON_WRITING_ACTIONS]


def _missing_memory(rows: StepRows, ctx: Context, needle: str, what: str, *,
                    after: int = 0) -> str:
    memory = [e for e in rows.executions if e.tool_name == "memory" and e.id > after]
    ran = [e for e in memory if e.really_ran]
    if ran:
        return f"memory ran without {what} ({_args(ran[-1])})"
    if memory:
        return _not_run("memory", memory[-1]) + _text_calls(rows, ctx)
    return "memory did not run" + _text_calls(rows, ctx)


def _attempts(rows: StepRows, name: str) -> str:
    failed = [e for e in rows.executions if e.tool_name == name and not e.really_ran]
    return f" ({_not_run(name, failed[-1])})" if failed else ""


def _not_run(name: str, execution: Execution) -> str:
    if execution.status == "ok":
        return f"{name} has an ok row but no tool message carrying its result"
    return f"{name} was called but {execution.status}"


def _text_calls(rows: StepRows, ctx: Context) -> str:
    names = unexecuted_tool_text(rows, ctx.vocabulary)
    return f"; the model wrote calls as text that did not run: {', '.join(names)}" if names else ""


def _names(executions: list[Execution] | tuple[Execution, ...]) -> str:
    return ", ".join(dict.fromkeys(e.tool_name for e in executions))


def _args(execution: Execution) -> str:
    return _quote(execution.arguments, 60)


def _quote(text: str, limit: int = 50) -> str:
    flat = " ".join(text.split())
    if not flat:
        return "(empty)"
    return repr(flat if len(flat) <= limit else flat[:limit - 1] + "…")
