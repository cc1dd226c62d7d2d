"""`calculate`: arithmetic a small model gets wrong, evaluated exactly and safely.

The expression is parsed with `ast` and only numbers, arithmetic operators, a few constants and
whitelisted math functions are evaluated; nothing is ever passed to eval. Operations that could
run for minutes or eat memory (huge powers, huge factorials) are refused up front.

Arithmetic works on numbers someone gave. Asked "how many legs does a spider have?", the 1.5B model
decided on `calculate` and called it with "8": the answer it already knew, dressed as a
computation. So a call whose numbers the conversation never wrote (`operands_given`) is not run,
and the request is answered in words.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from typing import Any, Callable

from .base import (
    Tool,
    ToolContext,
    ToolError,
    numbers_in,
    object_schema,
    outside_code,
    spells_a_number,
    with_plain_floats,
)

MAX_EXPRESSION_CHARS = 500
MAX_EXPONENT = 10_000
MAX_FACTORIAL = 1_000
MAX_RESULT_DIGITS = 5_000
_MAX_BITS = int(MAX_RESULT_DIGITS * 3.33)  # log2(10) bits per decimal digit

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt, "exp": math.exp, "log": math.log, "log10": math.log10, "log2": math.log2,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin, "acos": math.acos,
    "atan": math.atan, "atan2": math.atan2, "degrees": math.degrees, "radians": math.radians,
    "floor": math.floor, "ceil": math.ceil, "abs": abs, "round": round, "min": min, "max": max,
    "factorial": math.factorial, "gcd": math.gcd, "hypot": math.hypot,
}


def evaluate(expression: str) -> int | float:
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolError(f"expression is longer than {MAX_EXPRESSION_CHARS} characters")
    plain = _without_units(_with_percents(expression.replace("^", "**"))).strip()
    try:
        tree = ast.parse(plain, mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not an arithmetic expression: {exc.msg}{_words_in(plain)}") from None
    try:
        return _eval(tree.body)
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except (ValueError, OverflowError, TypeError) as exc:
        raise ToolError(f"cannot evaluate: {exc}") from None


_PERCENT_OF = re.compile(r"(\d+(?:\.\d+)?)\s*%\s*of\b", re.IGNORECASE)
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%(?!\s*[\w(.])")


def _with_percents(expression: str) -> str:
    """"12.5% * 368", "12.5% of 368" and "50%" as people write them (the 1.5B model passes them
    on): a % with no operand after it, or followed by "of", is a percentage; "7 % 2" stays modulo."""
    return _PERCENT.sub(r"(\1/100)", _PERCENT_OF.sub(r"(\1/100)*", expression))


_CURRENCY = re.compile(r"[$€£¥]")
_UNIT = re.compile(r"(?<=[\d)])\s*([A-Za-z]+)\b(?!\s*\()")


# A date is no quantity: "9 December" stays a syntax error, not 9. Seen on the 1.5B model, asked
# what is left to pay of 640 euros after 35 %: "35% of 640 euros - 35% of 640 euros * 9 December"
# evaluated to -2464.
_CALENDAR = frozenset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday "
    "saturday sunday".split())


def _words_in(expression: str) -> str:
    """What a failed expression holds that is no arithmetic, for the model's next try: seen, the
    1.5B model made "35% of 640 euros - 35% of 640 euros * 9 December" again after "invalid syntax"
    alone."""
    words = [w for w in dict.fromkeys(re.findall(r"[A-Za-z_]+", expression))
             if w not in _FUNCTIONS and w not in _CONSTANTS]
    if not words:
        return ""
    listed = ", ".join(repr(w) for w in words[:6])
    what = "is a word, not a number" if len(words) == 1 else "are words, not numbers"
    return f"; {listed} {what}: write only numbers, operators and parentheses, e.g. '250 * 18 / 100'"


def _without_units(expression: str) -> str:
    """The expression without the currency signs and the unit words after its numbers ("35% of
    640 euros", "3 kg * 4"): seen on the 1.5B model, "35% of 640 euros" was a syntax error, and
    the same call made again. A function's or a constant's name stays, and a month's or a day's."""
    def unit(match: re.Match[str]) -> str:
        word = match.group(1)
        return match.group(0) if word in _FUNCTIONS or word in _CONSTANTS or word.lower() in _CALENDAR else ""
    return _UNIT.sub(unit, _CURRENCY.sub("", expression))


def _eval(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS \
            and not node.keywords:
        args = [_eval(arg) for arg in node.args]
        if node.func.id == "factorial" and args and isinstance(args[0], int) and args[0] > MAX_FACTORIAL:
            raise ToolError(f"factorial is limited to {MAX_FACTORIAL}")
        return _FUNCTIONS[node.func.id](*args)
    allowed = ", ".join(sorted(_FUNCTIONS))
    raise ToolError(f"unsupported element {ast.unparse(node)!r}: use numbers, + - * / // % ** (or ^), "
                    f"parentheses, pi, e, tau and the functions {allowed}")


def _check_power(base: Any, exponent: Any) -> None:
    if abs(base) in (0, 1):
        return
    if abs(exponent) > MAX_EXPONENT:
        raise ToolError(f"exponent {exponent} is too large (limit {MAX_EXPONENT})")
    if isinstance(base, int) and isinstance(exponent, int) and base.bit_length() * exponent > _MAX_BITS:
        raise ToolError(f"the result would have more than {MAX_RESULT_DIGITS} digits")


def _calculate(arguments: dict[str, Any], ctx: ToolContext) -> str:
    result = evaluate(arguments["expression"])
    if isinstance(result, int) and result.bit_length() > _MAX_BITS:
        raise ToolError(f"the result has more than {MAX_RESULT_DIGITS} digits")
    if isinstance(result, float) and result.is_integer() and abs(result) < 1e15:
        return str(int(result))
    return with_plain_floats(repr(result))


def operands_given(arguments: dict[str, Any], request: str, context: str) -> str | None:
    """Why a call is not arithmetic the conversation asked for: its expression holds numbers and
    none of them (nor its percentage, 0.18 for "18%") is a number the request or its context
    wrote, and the request spells none in words; or it holds a fraction nobody gave (a rate, a
    price: the numbers of the question are data, its constants whole). Seen on the 1.5B model:
    "And how much did he charge?", with 180 euros in the notes, ran calculate("180 * 1.15").
    None when it may run."""
    expression = arguments.get("expression")
    operands = numbers_in(expression) if isinstance(expression, str) else set()
    if not operands:
        return None
    given = numbers_in(f"{request}\n{context}")
    given |= {round(n / 100, 12) for n in given}
    invented = sorted(n for n in operands if not n.is_integer() and round(n, 12) not in given)
    if invented:
        return (f"not run: {invented[0]:g} in {expression!r} is a number nobody gave; compute only "
                "with the user's and the tools' numbers, or answer from what you know")
    if any(round(n, 12) in given for n in operands):
        return None
    if spells_a_number(request):
        return None
    return (f"not run: no number of {expression!r} is one the user or a tool gave, so there is "
            "nothing to compute; answer from what you know")


def holds_a_number(request: str) -> bool:
    """Whether the message gives a number to compute with, in digits or in words, in its own
    words (a number inside the code it quotes belongs to that code: `echo $((6*7))` is a command
    to run). Seen on the 1.5B model: without one, the decision chose calculate for "And which
    Python version is installed here?", "How much did he charge?" and "how many sides does a
    hexagon have?"; and for "run `echo $((6*7))` in the shell", in English, Spanish, German and
    French (the six steps, 2026-11-29)."""
    words = outside_code(request)
    return bool(numbers_in(words)) or spells_a_number(words)


TOOLS: list[Tool] = [
    Tool(
        name="calculate",
        description="Evaluate an arithmetic expression exactly, e.g. '17 * 23', '(2**10 - 1) / 3', "
                    "'sqrt(2) * pi'. Supports + - * / // % ** and common math functions.",
        parameters=object_schema({"expression": {"type": "string", "description": "The expression."}},
                                 ["expression"]),
        run=_calculate,
        precondition=operands_given,
        wanted_by=holds_a_number,
    )
]
