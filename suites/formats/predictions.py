"""The prediction language of SyntaxGym test suites: parse, type-check, print, evaluate.

A prediction states how region values (surprisals) of an item's conditions should compare,
for example ``((6;%what_nogap%) > (6;%that_nogap%)) & ((7;%what_gap%) < (7;%that_gap%))``.
Formulas come from users, so this module only ever reads them: a hand-written tokenizer
and recursive-descent parser build an AST of frozen dataclasses; nothing is handed to
``eval``, ``exec`` or ``compile``, and no name in a formula can reach Python.

Grammar (EBNF). Whitespace (space, tab, newline, carriage return) may stand between any
two tokens, including inside a reference: ``( 5 ; %ambig_comma% )``.

    formula     = disjunction ;                          (* must be true/false *)
    disjunction = conjunction , { "|" , conjunction } ;  (* or *)
    conjunction = negation , { "&" , negation } ;        (* and *)
    negation    = { "~" } , comparison ;                 (* not *)
    comparison  = sum , [ ( "<" | ">" | "=" ) , sum ] ;  (* does not chain *)
    sum         = product , { ( "+" | "-" ) , product } ;
    product     = signed , { ( "*" | "/" ) , signed } ;
    signed      = { "-" } , atom ;                       (* unary minus *)
    atom        = number | reference | group
                | "abs" , ( "(" , disjunction , ")" | reference ) ;
    group       = "(" , disjunction , ")" | "[" , disjunction , "]" ;
    reference   = "(" , ( region | "*" ) , ";" , "%" , condition , "%" , ")" ;
    region      = digit , { digit } ;                    (* a whole number, 1 or more *)
    number      = decimal | ( "0x" | "0o" | "0b" ) , digits ;   (* no sign *)
    decimal     = ( digits , [ "." , [ digits ] ] | "." , digits ) ,
                  [ ( "e" | "E" ) , [ "+" | "-" ] , digits ] ;
    digits      = digit , { [ "_" ] , digit } ;   (* Python's forms: 2, 2.5, .5, 2., 1.5e1,
                                                     2E-3, 1_000; hex/octal/binary too *)
    condition   = namechar , { namechar } ;
    namechar    = ASCII letter | digit | "_" | "-" | "." ;

Precedence, lowest first: ``|``, ``&``, prefix ``~``, comparisons, ``+ -``, ``* /``, unary
``-``, atoms. Binary operators group to the left. So ``~ (1;%a%) > (1;%b%)`` means
``~((1;%a%) > (1;%b%))``, and ``-(1;%a%) * 2`` means ``(-(1;%a%)) * 2``.

Meaning:
- ``(N;%c%)`` is region N of condition c; ``(*;%c%)`` is the whole sentence (the value
  lookup gets region None; for ``sum`` that is the sum over all regions).
- ``=`` is approximate equality, as in SyntaxGym: ``|a - b| <= 1e-3 + 1e-5 * |b|``.
- ``a < b < c`` is an error ("comparisons do not chain"), never a silent reading.
- ``[ ]`` groups exactly like ``( )`` (the 2020 master branch uses it); each bracket must
  be closed by its own kind. The canonical form uses ``( )`` only.
- Types are checked at parse time: ``& | ~`` join true/false values, arithmetic and
  comparisons take numbers, and a whole formula must be true/false.

Errors are `PredictionError` with a 1-based column counted in characters from the start
of the text (newlines count as one character). Limits keep hostile input cheap: at most
`MAX_LENGTH` characters, `MAX_NESTING` levels of brackets, `MAX_DEPTH` levels of
operators, and `MAX_NUMBER_DIGITS` digits on each side of a number's decimal point.
"""

from __future__ import annotations

import difflib
import math
import re
import string
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Context, Decimal, InvalidOperation

__all__ = [
    "APPROX_ABS_TOL",
    "APPROX_REL_TOL",
    "MAX_DEPTH",
    "MAX_LENGTH",
    "MAX_NESTING",
    "MAX_NUMBER_DIGITS",
    "Abs",
    "Arith",
    "Compare",
    "Logic",
    "MissingValueError",
    "Neg",
    "Node",
    "Not",
    "Num",
    "PredictionError",
    "Ref",
    "canonical",
    "check_references",
    "evaluate",
    "parse",
    "references",
    "relation_to_formula",
    "tied_comparisons",
    "to_text",
    "truth_with_random_ties",
]

# SyntaxGym's tolerance for "=": isclose with rtol 1e-5 and atol 1e-3.
APPROX_ABS_TOL = 1e-3
APPROX_REL_TOL = 1e-5

MAX_LENGTH = 10_000
# Brackets cost nine Python frames each in the parser, so 50 stays far below the
# interpreter's recursion limit even when called from deep inside Django.
MAX_NESTING = 50
# Height of the tree, which also bounds recursion in to_text/evaluate/references. Long
# operator chains (a + b + c ...) count here, since they build a left-leaning tree.
MAX_DEPTH = 100
# Per side of the decimal point, so that printing "0." before ".5" can never push a
# literal over the limit and break parse(to_text(node)) == node.
MAX_NUMBER_DIGITS = 30


class PredictionError(ValueError):
    """A formula that cannot be parsed, or a relation that cannot be converted."""

    def __init__(self, message: str, col: int) -> None:
        super().__init__(f"col {col}: {message}")
        self.message = message
        self.col = col

    def __reduce__(self) -> tuple[type[PredictionError], tuple[str, int]]:
        # Celery and multiprocessing pickle exceptions; the default would call
        # __init__ with the formatted string only.
        return (PredictionError, (self.message, self.col))


class MissingValueError(Exception):
    """A value the formula needs is missing (None) or not a number (NaN); the caller
    should mark the item as not evaluable rather than as failing."""

    def __init__(self, message: str, ref: Ref | None = None) -> None:
        super().__init__(message)
        self.ref = ref


# ---------------------------------------------------------------------------------------
# AST


_NAME_CHARS = frozenset(string.ascii_letters + string.digits + "_-.")
_NAME_RE = re.compile(r"[A-Za-z0-9_.\-]+", re.ASCII)


@dataclass(frozen=True)
class Node:
    """Base class of all AST nodes."""


@dataclass(frozen=True)
class Num(Node):
    """A non-negative number literal; negative numbers are `Neg(Num(...))`."""

    value: Decimal

    def __post_init__(self) -> None:
        value = self.value
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = Decimal(str(value))
            object.__setattr__(self, "value", value)
        if not isinstance(value, Decimal) or not value.is_finite() or value.is_signed():
            raise ValueError(f"Num needs a finite, non-negative Decimal, got {value!r}")
        whole, _, fraction = _format_number(value).partition(".")
        if len(whole) > MAX_NUMBER_DIGITS or len(fraction) > MAX_NUMBER_DIGITS:
            raise ValueError(f"Num {value} has more than {MAX_NUMBER_DIGITS} digits on a side")


@dataclass(frozen=True)
class Ref(Node):
    """Region `region` of condition `condition`; region None is the whole sentence.

    A parsed reference knows where it was written (1-based columns of its region and of
    its condition name), so that messages about it can point there; the columns take no
    part in equality, so the same reference written twice is one reference."""

    region: int | None
    condition: str
    region_col: int | None = field(default=None, compare=False, repr=False)
    condition_col: int | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Validated so that to_text() of any Ref is a reference parse() reads back.
        if self.region is not None and (
            not isinstance(self.region, int) or isinstance(self.region, bool) or self.region < 1
        ):
            raise ValueError(f"region must be None or a whole number >= 1, got {self.region!r}")
        if not isinstance(self.condition, str) or not _NAME_RE.fullmatch(self.condition):
            raise ValueError(f"invalid condition name {self.condition!r}")


@dataclass(frozen=True)
class Neg(Node):
    operand: Node


@dataclass(frozen=True)
class Abs(Node):
    operand: Node


@dataclass(frozen=True)
class Arith(Node):
    """``left op right`` with op one of ``+ - * /``."""

    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Compare(Node):
    """``left op right`` with op one of ``< > =`` (``=`` is approximate)."""

    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Not(Node):
    operand: Node


@dataclass(frozen=True)
class Logic(Node):
    """``left op right`` with op ``&`` (and) or ``|`` (or)."""

    op: str
    left: Node
    right: Node


def _children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Neg | Abs | Not):
        return (node.operand,)
    if isinstance(node, Arith | Compare | Logic):
        return (node.left, node.right)
    return ()


def _is_boolean(node: Node) -> bool:
    return isinstance(node, Compare | Not | Logic)


# normalize() rounds to its context's precision (28 digits by default, and changeable by
# any code in the process); this one holds every literal the parser accepts exactly.
_EXACT = Context(prec=2 * MAX_NUMBER_DIGITS + 10)


def _format_number(value: Decimal) -> str:
    # normalize() drops trailing zeros; "f" writes 1E+2 as 100, never with an exponent.
    return format(value.normalize(_EXACT), "f")


# ---------------------------------------------------------------------------------------
# Tokenizer


@dataclass(frozen=True)
class _Token:
    kind: str  # "num", "cond", "abs", "eof", or the punctuation character itself
    text: str
    col: int


_PUNCTUATION = frozenset("()[]+-*/<>=&|~;")
_COMPARISONS = frozenset("<>=")
_WHITESPACE = frozenset(" \t\r\n")
# Every number literal Python's eval accepted (SyntaxGym evaluated formulas with it, so
# real suites may hold any of them), except complex numbers.
_NUMBER_RE = re.compile(
    r"""0[xX](?:_?[0-9a-fA-F])+ | 0[oO](?:_?[0-7])+ | 0[bB](?:_?[01])+
    | (?: (?:[0-9](?:_?[0-9])*)? \.[0-9](?:_?[0-9])* | [0-9](?:_?[0-9])*\.? )
      (?:[eE][+-]?[0-9](?:_?[0-9])*)?""",
    re.ASCII | re.VERBOSE,
)


def number_value(literal: str) -> Decimal:
    """The exact value of a number literal the tokenizer accepted."""
    clean = literal.replace("_", "")
    if clean[:2].lower() in ("0x", "0o", "0b"):
        return Decimal(int(clean, 0))
    return Decimal(clean)


def _digits_on_each_side(value: Decimal) -> tuple[int, int]:
    """Significant digits before and after the decimal point, computed from the exponent
    so that 1e999999 is never written out."""
    if not value:
        return 1, 0
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    trailing_zeros = len(digits) - len("".join(map(str, digits)).rstrip("0"))
    lowest = exponent + trailing_zeros
    return max(value.adjusted() + 1, 0), max(-lowest, 0)


_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)

# Operators people write from habit, with what to write instead. Checked before single
# characters, so "<=" is explained instead of failing later at "=".
_NOT_OPERATORS = {
    "<=": "'<=' is not an operator; write ~(a > b), or (a < b) | (a = b)",
    ">=": "'>=' is not an operator; write ~(a < b), or (a > b) | (a = b)",
    "=<": "'=<' is not an operator; write ~(a > b), or (a < b) | (a = b)",
    "=>": "'=>' is not an operator; write ~(a < b), or (a > b) | (a = b)",
    "==": "'==' is not an operator; write a single '=' (approximately equal)",
    "!=": "'!=' is not an operator; write ~(a = b)",
    "<>": "'<>' is not an operator; write ~(a = b)",
    "&&": "'&&' is not an operator; write a single '&' (and)",
    "||": "'||' is not an operator; write a single '|' (or)",
    "**": "'**' is not an operator; there is no power, write the product out with '*'",
}
_CHARACTER_HINTS = {
    "!": "write '~' for not",
    "^": "there is no power operator",
    ",": "abs() takes one argument, and references are written (region;%condition%)",
    "'": "there are no strings; condition names go between '%' in a reference",
    '"': "there are no strings; condition names go between '%' in a reference",
    ".": "'.' may only appear inside a number like 0.5 or a condition name",
    "%": "'%' encloses a condition name inside a reference like (1;%cond%)",
    "\u2212": "write '-' instead",
    "\u2013": "write '-' instead",
    "\u2014": "write '-' instead",
    "\u00d7": "write '*' instead",
    "\u00f7": "write '/' instead",
    "\u2264": "write ~(a > b), or (a < b) | (a = b)",
    "\u2265": "write ~(a < b), or (a > b) | (a = b)",
    "\u2260": "write ~(a = b)",
    "\u00ac": "write '~' for not",
    "\u2227": "write '&' for and",
    "\u2228": "write '|' for or",
    "\u00a0": "write a plain space instead",
    "\uff08": "write '(' instead",
    "\uff09": "write ')' instead",
    "\uff05": "write '%' instead",
    "\uff1b": "write ';' instead",
}
_WORD_HINTS = {
    "and": "write '&' for and",
    "or": "write '|' for or",
    "not": "write '~' for not",
    "true": "there are no true/false literals; write a comparison",
    "false": "there are no true/false literals; write a comparison",
}


def _describe_char(ch: str) -> str:
    if ch.isascii() and ch.isprintable():
        return f"'{ch}'"
    # Never echo control or lookalike characters raw: they hide in messages.
    if unicodedata.category(ch).startswith("C"):
        return f"U+{ord(ch):04X} (a control or unassigned character)"
    return f"U+{ord(ch):04X} ({unicodedata.name(ch, 'unnamed character')})"


def _describe_token(token: _Token) -> str:
    if token.kind == "eof":
        return "the end of the formula"
    if token.kind == "num":
        return f"the number {token.text}"
    if token.kind == "cond":
        return f"the condition name %{token.text}%"
    return f"'{token.text}'"


class _Lexer:
    """Produces tokens on demand, so that errors are reported left to right."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0

    def next(self) -> _Token:
        text, n = self._text, len(self._text)
        i = self._pos
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i == n:
            self._pos = i
            return _Token("eof", "", n + 1)
        col = i + 1
        pair = text[i : i + 2]
        if pair in _NOT_OPERATORS:
            raise PredictionError(_NOT_OPERATORS[pair], col)
        ch = text[i]
        if ch in _PUNCTUATION:
            self._pos = i + 1
            return _Token(ch, ch, col)
        if "0" <= ch <= "9" or (ch == "." and i + 1 < n and "0" <= text[i + 1] <= "9"):
            return self._number(i)
        if ch == "%":
            return self._condition(i)
        word = _WORD_RE.match(text, i)
        if word:
            name = word.group()
            if name == "abs":
                self._pos = word.end()
                return _Token("abs", name, col)
            hint = _WORD_HINTS.get(name.lower())
            if hint is None:
                hint = (
                    "the only function is abs(...), and condition names go inside a "
                    f"reference like (1;%{name}%)"
                )
            raise PredictionError(f"unknown name '{name[:40]}': {hint}", col)
        hint = _CHARACTER_HINTS.get(ch)
        suffix = f"; {hint}" if hint else ""
        raise PredictionError(f"unexpected character {_describe_char(ch)}{suffix}", col)

    def _number(self, i: int) -> _Token:
        text = self._text
        match = _NUMBER_RE.match(text, i)
        assert match is not None and match.end() > i  # the caller saw a digit
        end = match.end()
        literal = match.group()
        shown = literal if len(literal) <= 20 else literal[:20] + "..."
        try:
            whole, fraction = _digits_on_each_side(number_value(literal))
        except InvalidOperation:
            # An exponent beyond what Decimal can hold (1e99999999999999999999).
            whole = fraction = MAX_NUMBER_DIGITS + 1
        if whole > MAX_NUMBER_DIGITS or fraction > MAX_NUMBER_DIGITS:
            raise PredictionError(
                f"number {shown} is too long: at most {MAX_NUMBER_DIGITS} digits before "
                f"and {MAX_NUMBER_DIGITS} after the decimal point",
                i + 1,
            )
        if end < len(text):
            after = text[end]
            if after in "eE":
                raise PredictionError(
                    f"malformed exponent after {shown}: write it like 1.5e1 or 2E-3", end + 1
                )
            if after == ".":
                raise PredictionError(
                    f"malformed number after {shown}: write numbers like 2, 2.5, .5 or 1e-3",
                    end + 1,
                )
            if after.isalnum() or after == "_":
                raise PredictionError(
                    f"unexpected {_describe_char(after)} right after the number {shown}",
                    end + 1,
                )
        self._pos = end
        return _Token("num", literal, i + 1)

    def _condition(self, i: int) -> _Token:
        text, n = self._text, len(self._text)
        j = i + 1
        while j < n and text[j] in _NAME_CHARS:
            j += 1
        if j == n:
            raise PredictionError(
                "condition name is missing its closing '%'; write references like (1;%cond%)",
                i + 1,
            )
        if text[j] != "%":
            raise PredictionError(
                f"unexpected {_describe_char(text[j])} in a condition name: names may "
                "contain only letters, digits, '_', '-' and '.', and end with '%'",
                j + 1,
            )
        if j == i + 1:
            raise PredictionError("empty condition name '%%'", i + 1)
        self._pos = j + 1
        return _Token("cond", text[i + 1 : j], i + 1)


# ---------------------------------------------------------------------------------------
# Parser


class _Parser:
    def __init__(self, text: str) -> None:
        self._lexer = _Lexer(text)
        self._ahead: list[_Token] = []
        self._nesting = 0
        # Tree heights of the operator nodes built so far, keyed by id(); leaves count 1.
        # Every node registered here stays alive in the tree, so ids are not reused.
        self._heights: dict[int, int] = {}

    # -- token access

    def _peek(self, k: int = 0) -> _Token:
        while len(self._ahead) <= k:
            self._ahead.append(self._lexer.next())
        return self._ahead[k]

    def _take(self) -> _Token:
        token = self._peek()
        self._ahead.pop(0)
        return token

    # -- checks

    def _build(self, node: Node, col: int) -> Node:
        height = 1 + max(self._heights.get(id(child), 1) for child in _children(node))
        if height > MAX_DEPTH:
            raise PredictionError(
                f"formula is nested too deeply (more than {MAX_DEPTH} levels of operators); "
                "split it into several predictions",
                col,
            )
        self._heights[id(node)] = height
        return node

    @staticmethod
    def _need_number(node: Node, col: int, what: str) -> None:
        if _is_boolean(node):
            hint = ""
            if isinstance(node, Compare) and what in ("'<'", "'>'", "'='"):
                hint = "; comparisons do not chain, write (a < b) & (b < c)"
            raise PredictionError(f"{what} needs a number, found a true/false value{hint}", col)

    @staticmethod
    def _need_boolean(node: Node, col: int, what: str) -> None:
        if not _is_boolean(node):
            raise PredictionError(
                f"{what} needs a true/false value, found a number; "
                "compare it with <, > or =, for example ... > 0",
                col,
            )

    # -- grammar, one method per rule of the module docstring

    def formula(self) -> Node:
        start = self._peek()
        if start.kind == "eof":
            raise PredictionError("the formula is empty", 1)
        node = self._disjunction()
        end = self._peek()
        if end.kind in (")", "]"):
            raise PredictionError(f"unmatched '{end.text}': no bracket before it is open", end.col)
        if end.kind != "eof":
            raise PredictionError(
                "expected an operator (+ - * / < > = & |) or the end of the formula, "
                f"found {_describe_token(end)}",
                end.col,
            )
        if not _is_boolean(node):
            raise PredictionError(
                "a prediction must be true or false, but this formula is a number; "
                "compare it with <, > or =, for example ... > 0",
                start.col,
            )
        return node

    # Each rule below is one method with a loop, not a chain of helpers: a bracket costs
    # one Python frame per rule, and MAX_NESTING is sized on that.

    def _disjunction(self) -> Node:
        left_col = self._peek().col
        left = self._conjunction()
        while self._peek().kind == "|":
            token = self._take()
            self._need_boolean(left, left_col, "'|' (or)")
            right_col = self._peek().col
            right = self._conjunction()
            self._need_boolean(right, right_col, "'|' (or)")
            left = self._build(Logic("|", left, right), token.col)
        return left

    def _conjunction(self) -> Node:
        left_col = self._peek().col
        left = self._negation()
        while self._peek().kind == "&":
            token = self._take()
            self._need_boolean(left, left_col, "'&' (and)")
            right_col = self._peek().col
            right = self._negation()
            self._need_boolean(right, right_col, "'&' (and)")
            left = self._build(Logic("&", left, right), token.col)
        return left

    def _negation(self) -> Node:
        # A loop, not recursion: "~~~~..." must not consume Python frames.
        nots: list[_Token] = []
        while self._peek().kind == "~":
            nots.append(self._take())
        col = self._peek().col
        node = self._comparison()
        if nots:
            self._need_boolean(node, col, "'~' (not)")
        for token in reversed(nots):
            node = self._build(Not(node), token.col)
        return node

    def _comparison(self) -> Node:
        left_col = self._peek().col
        left = self._sum()
        token = self._peek()
        if token.kind not in _COMPARISONS:
            return left
        self._take()
        self._need_number(left, left_col, f"'{token.kind}'")
        right_col = self._peek().col
        right = self._sum()
        self._need_number(right, right_col, f"'{token.kind}'")
        node = self._build(Compare(token.kind, left, right), token.col)
        after = self._peek()
        if after.kind in _COMPARISONS:
            raise PredictionError(
                f"comparisons do not chain; write (a {token.kind} b) & (b {after.kind} c)",
                after.col,
            )
        return node

    def _sum(self) -> Node:
        left_col = self._peek().col
        left = self._product()
        while self._peek().kind in ("+", "-"):
            token = self._take()
            self._need_number(left, left_col, f"'{token.kind}'")
            right_col = self._peek().col
            right = self._product()
            self._need_number(right, right_col, f"'{token.kind}'")
            left = self._build(Arith(token.kind, left, right), token.col)
        return left

    def _product(self) -> Node:
        left_col = self._peek().col
        left = self._signed()
        while self._peek().kind in ("*", "/"):
            token = self._take()
            self._need_number(left, left_col, f"'{token.kind}'")
            right_col = self._peek().col
            right = self._signed()
            self._need_number(right, right_col, f"'{token.kind}'")
            left = self._build(Arith(token.kind, left, right), token.col)
        return left

    def _signed(self) -> Node:
        minuses: list[_Token] = []
        while self._peek().kind == "-":
            minuses.append(self._take())
        col = self._peek().col
        node = self._atom()
        if minuses:
            self._need_number(node, col, "unary '-'")
        for token in reversed(minuses):
            node = self._build(Neg(node), token.col)
        return node

    def _atom(self) -> Node:
        token = self._peek()
        if token.kind == "num":
            self._take()
            return Num(number_value(token.text))
        if token.kind == "(":
            # "(" then a region (or "*") then ";" can only be a reference.
            if self._peek(1).kind in ("num", "*") and self._peek(2).kind == ";":
                return self._reference()
            return self._group(")")
        if token.kind == "[":
            return self._group("]")
        if token.kind == "abs":
            self._take()
            if self._peek().kind != "(":
                raise PredictionError(
                    f"expected '(' after abs, found {_describe_token(self._peek())}",
                    self._peek().col,
                )
            col = self._peek().col
            operand = self._atom()
            self._need_number(operand, col, "abs(...)")
            return self._build(Abs(operand), token.col)
        hint = ""
        if token.kind == "cond":
            hint = f"; a condition name goes inside a reference like (1;%{token.text}%)"
        elif token.kind == ";":
            hint = "; ';' only appears inside a reference like (1;%cond%)"
        raise PredictionError(
            "expected a value (a number, a reference like (1;%cond%), abs(...) or a "
            f"bracket), found {_describe_token(token)}{hint}",
            token.col,
        )

    def _group(self, close: str) -> Node:
        opening = self._take()
        self._nesting += 1
        if self._nesting > MAX_NESTING:
            raise PredictionError(
                f"too many nested brackets (at most {MAX_NESTING} levels)", opening.col
            )
        node = self._disjunction()
        end = self._peek()
        if end.kind != close:
            hint = ""
            if end.kind == ";":
                hint = "; ';' only appears inside a reference like (1;%cond%)"
            raise PredictionError(
                f"expected '{close}' to close the '{opening.text}' at col {opening.col}, "
                f"found {_describe_token(end)}{hint}",
                end.col,
            )
        self._take()
        self._nesting -= 1
        return node

    def _reference(self) -> Ref:
        opening = self._take()
        region_token = self._take()
        region: int | None = None
        if region_token.kind == "num":
            if not region_token.text.isdigit():
                raise PredictionError(
                    f"a region number must be a whole number, found {region_token.text}",
                    region_token.col,
                )
            region = int(region_token.text)
            if region < 1:
                raise PredictionError(
                    f"regions are numbered from 1, found {region_token.text}", region_token.col
                )
        self._take()  # the ";" seen by _atom
        name = self._peek()
        if name.kind != "cond":
            raise PredictionError(
                f"expected a condition name like %cond% after ';', found {_describe_token(name)}",
                name.col,
            )
        self._take()
        end = self._peek()
        if end.kind != ")":
            raise PredictionError(
                f"expected ')' to close the reference opened at col {opening.col}, "
                f"found {_describe_token(end)}",
                end.col,
            )
        self._take()
        # The name starts right after its opening '%'.
        return Ref(region, name.text, region_col=region_token.col, condition_col=name.col + 1)


# ---------------------------------------------------------------------------------------
# Public API


def parse(text: str) -> Node:
    """Parse and type-check a prediction formula; the result is always true/false-valued.

    Raises PredictionError, and nothing else, for any text that is not a valid formula.
    """
    if not isinstance(text, str):
        raise PredictionError(f"a formula must be text, got {type(text).__name__}", 1)
    if len(text) > MAX_LENGTH:
        raise PredictionError(
            f"the formula is too long ({len(text)} characters; at most {MAX_LENGTH})",
            MAX_LENGTH + 1,
        )
    return _Parser(text).formula()


# Precedence levels for printing, matching the grammar (higher binds tighter).
_LEVEL_OR, _LEVEL_AND, _LEVEL_NOT, _LEVEL_COMPARE, _LEVEL_SUM, _LEVEL_PRODUCT = 1, 2, 3, 4, 5, 6
_LEVEL_NEG, _LEVEL_ATOM = 7, 8


def _level(node: Node) -> int:
    if isinstance(node, Logic):
        return _LEVEL_OR if node.op == "|" else _LEVEL_AND
    if isinstance(node, Not):
        return _LEVEL_NOT
    if isinstance(node, Compare):
        return _LEVEL_COMPARE
    if isinstance(node, Arith):
        return _LEVEL_SUM if node.op in "+-" else _LEVEL_PRODUCT
    if isinstance(node, Neg):
        return _LEVEL_NEG
    return _LEVEL_ATOM


def _wrapped(node: Node, parens: bool) -> str:
    text = to_text(node)
    return f"({text})" if parens else text


def to_text(node: Node) -> str:
    """The canonical text of a formula: round brackets only, single spaces around binary
    operators, and only the brackets the grammar needs, except that the operand of ``~``
    is always bracketed (``~((1;%a%) > 0)``) so that no reader takes ``~`` for a sign."""
    if isinstance(node, Num):
        return _format_number(node.value)
    if isinstance(node, Ref):
        region = "*" if node.region is None else str(node.region)
        return f"({region};%{node.condition}%)"
    if isinstance(node, Abs):
        return f"abs({to_text(node.operand)})"
    if isinstance(node, Neg):
        return "-" + _wrapped(node.operand, _level(node.operand) < _LEVEL_NEG)
    if isinstance(node, Not):
        return "~" + _wrapped(node.operand, not isinstance(node.operand, Not))
    if isinstance(node, Arith | Compare | Logic):
        level = _level(node)
        # Left-grouping operators need brackets on the right at the same level; the
        # comparison does not group at all, so it needs them on both sides.
        left_parens = _level(node.left) < level or (
            isinstance(node, Compare) and _level(node.left) == level
        )
        right_parens = _level(node.right) <= level
        return f"{_wrapped(node.left, left_parens)} {node.op} {_wrapped(node.right, right_parens)}"
    raise TypeError(f"not a prediction node: {node!r}")


def canonical(text: str) -> str:
    """The canonical form of a formula: ``to_text(parse(text))``."""
    return to_text(parse(text))


def references(node: Node) -> list[Ref]:
    """The references in a formula, in order of appearance, each once."""
    found: dict[Ref, None] = {}

    def visit(current: Node) -> None:
        if isinstance(current, Ref):
            found.setdefault(current, None)
        for child in _children(current):
            visit(child)

    visit(node)
    return list(found)


def _describe_regions(region_numbers: set[int]) -> str:
    if not region_numbers:
        return "the suite has no regions"
    ordered = sorted(region_numbers)
    if len(ordered) == 1:
        return f"the only region is {ordered[0]}"
    if ordered[-1] - ordered[0] == len(ordered) - 1:
        return f"regions are {ordered[0]}-{ordered[-1]}"
    return "regions are " + ", ".join(str(number) for number in ordered)


def check_references(
    node: Node, *, region_numbers: set[int], condition_names: set[str]
) -> list[str]:
    """Plain messages for references to regions or conditions the suite does not have;
    an empty list when every reference resolves. Whole-sentence references have no
    region to check."""
    messages: list[str] = []
    for ref in references(node):
        if ref.region is not None and ref.region not in region_numbers:
            message = f"region {ref.region} does not exist ({_describe_regions(region_numbers)})"
            if message not in messages:
                messages.append(message)
        if ref.condition not in condition_names:
            names = sorted(condition_names)
            listing = f"conditions: {', '.join(names)}" if names else "the suite has no conditions"
            message = f"condition '{ref.condition}' does not exist ({listing})"
            close = difflib.get_close_matches(ref.condition, names, n=1)
            if close:
                message += f"; did you mean '{close[0]}'?"
            if message not in messages:
                messages.append(message)
    return messages


def _approx_equal(a: float, b: float) -> bool:
    if math.isinf(a) or math.isinf(b):
        # Otherwise an infinite |b| would make every finite a "equal" to it.
        return a == b
    return abs(a - b) <= APPROX_ABS_TOL + APPROX_REL_TOL * abs(b)


def _value_of(node: Node, value: Callable[[int | None, str], float | None]) -> float:
    if isinstance(node, Num):
        return float(node.value)
    if isinstance(node, Ref):
        raw = value(node.region, node.condition)
        if raw is None:
            raise MissingValueError(f"no value for {to_text(node)}", node)
        number = float(raw)
        if math.isnan(number):
            raise MissingValueError(f"the value for {to_text(node)} is not a number", node)
        return number
    if isinstance(node, Neg):
        return -_value_of(node.operand, value)
    if isinstance(node, Abs):
        return abs(_value_of(node.operand, value))
    if isinstance(node, Arith):
        left, right = _value_of(node.left, value), _value_of(node.right, value)
        if node.op == "+":
            return left + right
        if node.op == "-":
            return left - right
        if node.op == "*":
            return left * right
        if node.op == "/":
            return left / right
    raise TypeError(f"not a number-valued node: {node!r}")


def _truth(
    node: Node,
    value: Callable[[int | None, str], float | None],
    tie: Callable[[Compare], bool] | None = None,
) -> bool:
    if isinstance(node, Compare):
        left, right = _value_of(node.left, value), _value_of(node.right, value)
        if math.isnan(left) or math.isnan(right):
            # inf - inf and the like: no honest answer either way.
            raise MissingValueError(f"{to_text(node)} compares a value that is not a number")
        if node.op in "<>" and left == right and tie is not None:
            return tie(node)
        if node.op == "<":
            return left < right
        if node.op == ">":
            return left > right
        if node.op == "=":
            return _approx_equal(left, right)
    if isinstance(node, Not):
        return not _truth(node.operand, value, tie)
    if isinstance(node, Logic):
        # Both sides always run (no short-circuit), so a missing value anywhere makes the
        # item not evaluable whatever the order of the operands.
        left, right = _truth(node.left, value, tie), _truth(node.right, value, tie)
        if node.op == "&":
            return left and right
        if node.op == "|":
            return left or right
    raise TypeError(f"not a true/false-valued node: {node!r}")


def evaluate(
    node: Node,
    value: Callable[[int | None, str], float | None],
    *,
    tie: Callable[[Compare], bool] | None = None,
) -> bool:
    """Evaluate a parsed formula; ``value(region, condition)`` gives a region's value
    (region None: the whole sentence).

    Errors raised by `value` (KeyError, LookupError, ...) propagate unchanged. A value of
    None or NaN, or a comparison of NaN (such as inf - inf), raises MissingValueError.
    Division by zero raises ZeroDivisionError. Every reference is looked up, even when
    one side of ``&`` or ``|`` already decides the result.

    A strict ``<`` or ``>`` whose two sides are exactly equal (a tie) is false, as in
    SyntaxGym, unless `tie` is given: then ``tie(comparison)`` decides it.
    """
    return _truth(node, value, tie)


@dataclass(frozen=True)
class ComparisonSides:
    """One comparison of a formula with the values of its two sides (None where a side
    needs a missing value or divides by zero)."""

    left_text: str
    op: str
    right_text: str
    left: float | None
    right: float | None


def _side_value(node: Node, value: Callable[[int | None, str], float | None]) -> float | None:
    try:
        return _value_of(node, value)
    except (MissingValueError, ZeroDivisionError):
        return None


def comparison_sides(
    node: Node, value: Callable[[int | None, str], float | None]
) -> list[ComparisonSides]:
    """Every comparison of a formula, in reading order, with its two sides' values: what
    a reader checks to see why an item passed or failed."""
    found: list[ComparisonSides] = []

    def visit(current: Node) -> None:
        if isinstance(current, Compare):
            found.append(
                ComparisonSides(
                    to_text(current.left),
                    current.op,
                    to_text(current.right),
                    _side_value(current.left, value),
                    _side_value(current.right, value),
                )
            )
        for child in _children(current):
            visit(child)

    visit(node)
    return found


def tied_comparisons(node: Node, value: Callable[[int | None, str], float | None]) -> int:
    """How many strict comparisons of the formula have two exactly equal sides (each
    of them made the comparison false). Raises as `evaluate` does."""
    count = 0

    def record(_comparison: Compare) -> bool:
        nonlocal count
        count += 1
        return False

    _truth(node, value, record)
    return count


# 2**16 evaluations of one formula at most; beyond that ties stay failures.
MAX_BROKEN_TIES = 16


def truth_with_random_ties(node: Node, value: Callable[[int | None, str], float | None]) -> float:
    """The probability that the formula holds when every tied strict comparison is
    decided by a fair coin (one coin per distinct comparison), as Hu et al. (2020) broke
    ties at random: 1.0 or 0.0 without ties, 0.5 for one decisive tie.

    Exact, by trying every way the ties can fall. A formula with more than
    `MAX_BROKEN_TIES` distinct tied comparisons keeps them as failures."""
    seen: dict[Compare, None] = {}

    def record(comparison: Compare) -> bool:
        seen[comparison] = None
        return False

    strict = _truth(node, value, record)
    tied = list(seen)
    if not tied or len(tied) > MAX_BROKEN_TIES:
        return float(strict)
    held = 0
    for pattern in range(2 ** len(tied)):
        choice = {c: bool(pattern >> i & 1) for i, c in enumerate(tied)}
        held += _truth(node, value, choice.__getitem__)
    return held / 2 ** len(tied)


_RELATIONS = {
    "greaterthan": ">",
    "lessthan": "<",
    "equal": "=",
    "equals": "=",
    "eq": "=",
    "gt": ">",
    "lt": "<",
}


def relation_to_formula(relation: str, region_number: int, left: str, right: str) -> str:
    """Turn a 2019-format prediction ``{"relation": "greaterthan", "region_number": 3,
    "l_operand": "that", "r_operand": "what"}`` into a canonical formula such as
    ``(3;%that%) > (3;%what%)``. Errors are PredictionError at col 1."""
    key = relation.strip().lower() if isinstance(relation, str) else None
    if key not in _RELATIONS:
        raise PredictionError(
            f"unknown relation {relation!r}; accepted (any case): {', '.join(_RELATIONS)}", 1
        )
    if not isinstance(region_number, int) or isinstance(region_number, bool) or region_number < 1:
        raise PredictionError(
            f"region_number must be a whole number from 1, got {region_number!r}", 1
        )
    for name in (left, right):
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise PredictionError(
                f"invalid condition name {name!r}: names may contain only letters, digits, "
                "'_', '-' and '.'",
                1,
            )
    op = _RELATIONS[key]
    return canonical(f"({region_number};%{left}%) {op} ({region_number};%{right}%)")
