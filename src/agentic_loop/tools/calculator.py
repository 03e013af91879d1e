"""A calculator tool: exact arithmetic on an expression, read as a syntax tree, never ``eval``.

Why a tool: a 135M model does not multiply 3-digit numbers reliably, and a
reply that states a wrong product is the failure the tool tasks measure. Why
not ``eval``: the expression comes from a model, and ``eval`` runs anything.
:func:`calculate` parses the expression with :mod:`ast` and evaluates only
numbers, ``+ - * / // % **``, unary signs and parentheses, in exact rational
arithmetic (``0.1 + 0.2`` is ``0.3``; ``1 / 3`` shows 12 significant digits).
A power whose exponent is not an integer is computed in floating point.

What a model writes is forgiven where it is unambiguous: thousands commas
(``2,491``), ``×``, ``·`` or ``x`` between numbers for a product, ``÷``, ``−``,
and ``^`` for a power. Sizes are capped,
so no expression can make the host compute for long: at most
:data:`MAX_EXPRESSION_CHARS` characters, exponents up to
:data:`MAX_EXPONENT`, and every intermediate value under
``10 ** MAX_DIGITS`` (numerator and denominator). A refusal or a division by
zero raises :class:`CalculatorError`, which the ready :data:`calculator` tool
returns as an error result.

Example:
    >>> calculate("53 * 47"), calculate("(1,250 + 3.5) / 4"), calculate("2^10 - 7 // 2")
    ('2491', '313.375', '1021')
    >>> calculate("0.1 + 0.2"), calculate("1/3"), calculate("2 ** 0.5")
    ('0.3', '0.333333333333', '1.41421356237')
    >>> try:
    ...     calculate("__import__('os')")
    ... except CalculatorError as err:
    ...     print(str(err).split(": ", 1)[1])
    only numbers, + - * / // % ** and parentheses are allowed, not a function call
    >>> calculator.invoke({"type": "tool_call", "name": "calculator", "id": "1",
    ...                    "args": {"expression": "1/0"}}).content
    'cannot evaluate "1/0": division by zero'
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from decimal import Context, Decimal
from fractions import Fraction

from langchain_core.tools import StructuredTool

from agentic_loop.tools.safe import SafeTool, ToolFailed, safe_tool

__all__ = ["MAX_DIGITS", "MAX_EXPONENT", "MAX_EXPRESSION_CHARS", "CalculatorError", "calculate",
           "calculator"]

#: The longest expression the calculator reads.
MAX_EXPRESSION_CHARS = 500
#: The largest exponent (in absolute value) a power may have.
MAX_EXPONENT = 1000
#: Every value (numerator and denominator) stays under ``10 ** MAX_DIGITS``.
MAX_DIGITS = 100

_LIMIT = 10 ** MAX_DIGITS
_SIGNIFICANT = 12  # digits shown for a result with no exact short decimal form
Number = Fraction | float
_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}
_SPELLINGS = (("×", "*"), ("·", "*"), ("÷", "/"), ("−", "-"), ("^", "**"))
_TIMES_X = re.compile(r"(?<=[\d)])\s*[xX]\s*(?=[\d(])")
_THOUSANDS = re.compile(r"(?<![\d.])(\d{1,3}(?:,\d{3})+)(?![\d,])")
_NAMES = {ast.Call: "a function call", ast.Name: "a name", ast.Attribute: "an attribute",
          ast.Compare: "a comparison", ast.BoolOp: "a boolean operator",
          ast.Subscript: "an index", ast.Lambda: "a lambda",
          ast.Tuple: "a comma between numbers (write 2491 or 2,491, not 1,2)"}


class CalculatorError(ToolFailed):
    """An expression the calculator refuses or cannot evaluate (the text says which and why)."""


class _Refused(CalculatorError):
    """Why a part of an expression is refused (re-raised naming the whole expression)."""


def _refuse(expression: str, why: str) -> CalculatorError:
    shown = expression if len(expression) <= 80 else expression[:77] + "..."
    return CalculatorError(f'cannot evaluate "{shown}": {why}')


def _normalised(expression: str) -> str:
    text = expression.strip()
    for written, python in _SPELLINGS:
        text = text.replace(written, python)
    text = _TIMES_X.sub("*", text)
    return _THOUSANDS.sub(lambda m: m.group(1).replace(",", ""), text)


def _checked(value: Number) -> Number:
    if isinstance(value, float):
        if not math.isfinite(value) or abs(value) >= _LIMIT:
            raise _Refused(f"the result is too large (over 10**{MAX_DIGITS})")
        return value
    if abs(value.numerator) >= _LIMIT or value.denominator >= _LIMIT:
        raise _Refused(f"the result is too large (over 10**{MAX_DIGITS})")
    return value


def _power(base: Number, exponent: Number) -> Number:
    if abs(float(exponent)) > MAX_EXPONENT:
        raise _Refused(f"the exponent is over {MAX_EXPONENT}")
    if isinstance(exponent, Fraction) and exponent.denominator == 1 \
            and isinstance(base, Fraction):
        bits = max(abs(base.numerator).bit_length(), base.denominator.bit_length())
        if bits > 1 and (bits - 1) * abs(exponent) > MAX_DIGITS * 3.33:
            raise _Refused(f"the result is too large (over 10**{MAX_DIGITS})")
        if base == 0 and exponent < 0:
            raise _Refused("division by zero")
        return Fraction(base) ** int(exponent)
    if base < 0:
        raise _Refused("a negative number to a fractional power")
    return float(base) ** float(exponent)


def _evaluate(node: ast.AST) -> Number:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) is float:
        return _checked(Fraction(repr(node.value)))  # 0.1 is one tenth, as written
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return _checked(Fraction(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        operand = _evaluate(node.operand)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            return _checked(_power(left, right))
        op = _BINARY.get(type(node.op))
        if op is not None:
            return _checked(op(left, right))
    kind = next((name for cls, name in _NAMES.items() if isinstance(node, cls)),
                f"'{type(node).__name__}'")
    if isinstance(node, ast.Constant):
        kind = f"the literal {node.value!r:.40}"
    raise _Refused(f"only numbers, + - * / // % ** and parentheses are allowed, not {kind}")


def _shown(value: Number) -> str:
    if isinstance(value, float):
        return format(Decimal(repr(value)).normalize(Context(prec=_SIGNIFICANT)), "f")
    if value.denominator == 1:
        return str(value.numerator)
    den = value.denominator
    for prime in (2, 5):
        while den % prime == 0:
            den //= prime
    if den == 1:  # a terminating decimal: shown exactly
        return format(Decimal(value.numerator) / Decimal(value.denominator), "f")
    exact = Context(prec=_SIGNIFICANT).divide(Decimal(value.numerator), Decimal(value.denominator))
    return format(exact.normalize(), "f")


def calculate(expression: str) -> str:
    """The value of an arithmetic ``expression``, exact where it can be, as plain text.

    Raises:
        CalculatorError: for anything but arithmetic, a syntax error, a division by
            zero or a value past the caps (the message says which).
    """
    if not isinstance(expression, str) or not expression.strip():
        raise CalculatorError(f"expression must be a non-empty string such as '53 * 47', "
                              f"got {expression!r:.60}")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"the expression has {len(expression)} characters; the calculator "
                              f"reads at most {MAX_EXPRESSION_CHARS}: split it into steps")
    try:
        tree = ast.parse(_normalised(expression), mode="eval")
    except SyntaxError as err:
        raise _refuse(expression, f"not an arithmetic expression ({err.msg})") from None
    try:
        return _shown(_evaluate(tree))
    except _Refused as err:
        raise _refuse(expression, str(err)) from None
    except ZeroDivisionError:
        raise _refuse(expression, "division by zero") from None
    except (ArithmeticError, ValueError, MemoryError, RecursionError) as err:
        raise _refuse(expression, str(err) or type(err).__name__) from None


def _calculator(expression: str) -> str:
    return calculate(expression)


#: The ready calculator tool (one argument, ``expression``); errors come back as error results.
calculator: SafeTool = safe_tool(StructuredTool.from_function(
    _calculator, name="calculator",
    description="Evaluate an arithmetic expression exactly and return its value, e.g. "
                "'53 * 47' or '(1250 + 3.5) / 4'. Use numbers, + - * / // % ** and "
                "parentheses only; no names or units.",
), timeout_s=5.0)
