"""LaTeX math as readable text: spaced as TeX spaces it (relations and binary operators get a
space on each side, a sign does not), scripts as Unicode sub- and superscripts where they exist
(`H₂O`), ordinals as `19th` (or `<sup>th</sup>` in rich text), symbols pylatexenc drops kept."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pylatexenc.latex2text import LatexNodes2Text

# Operator names TeX sets upright (`\sin x`).
OPERATORS = frozenset(
    "log lg ln exp sin cos tan cot sec csc sinh cosh tanh coth arcsin arccos arctan min max lim "
    "liminf limsup sup inf det arg deg dim gcd hom ker Pr".split()
)
# TeX's classes of math atoms (The TeXbook, chapter 17 and appendix G), as far as spacing the
# text needs them: a relation or a binary operator gets one space on each side, whatever the
# source had (`a=b`, `\\alpha \\pm 0.1` -> `a = b`, `α ± 0.1`); everything else keeps the source's.
_REL, _BIN, _OP, _OPEN, _CLOSE, _PUNCT, _ORD, _COLON, _GLUE = (
    "rel bin op open close punct ord colon glue".split()
)
_RELATIONS = frozenset(
    "leq geq le ge neq ne approx sim simeq equiv propto to rightarrow leftarrow leftrightarrow "
    "Rightarrow Leftarrow mapsto in notin subset subseteq supset mid parallel perp lesssim gtrsim ll "
    "gg".split()
)
_BINARIES = frozenset(
    "cdot times div pm mp cup cap setminus wedge vee oplus otimes odot circ bullet star ast".split()
)
_COMMAND_CLASS = {
    **dict.fromkeys(_RELATIONS, _REL),
    **dict.fromkeys(_BINARIES, _BIN),
    **dict.fromkeys([*OPERATORS, "sum", "prod", "int"], _OP),
    **dict.fromkeys(["langle", "lfloor", "lceil"], _OPEN),
    **dict.fromkeys(["rangle", "rfloor", "rceil"], _CLOSE),
    **dict.fromkeys([",", ";", "!", " ", "quad", "qquad"], _GLUE),
}
_CHAR_CLASS = {
    **dict.fromkeys("=<>≤≥≠≈∼≃≡∝→←↔⇒⇐↦∈∉⊂⊆⊃≪≫", _REL),
    **dict.fromkeys("+-*±∓×÷·∪∩−", _BIN),
    **dict.fromkeys("([\x05", _OPEN),
    **dict.fromkeys(")]\x06", _CLOSE),
    **dict.fromkeys(",;", _PUNCT),
    ":": _COLON,  # a relation to TeX, but `f: X \\to Y` reads as text spaced as it was written
}
# A binary operator with no operand before it is a sign (`-1`, `(\\pm x)`, `= -b`): TeX's rule 5.
_NO_OPERAND_BEFORE = frozenset({None, _BIN, _OP, _REL, _COLON, _OPEN, _PUNCT})
_DELIMITER_SIZE = frozenset("left right big Big bigl bigr".split())  # joined to the delimiter after
# Commands whose arguments are set apart (a fraction's in a smaller style, text as text): their
# arguments keep the source's spacing. `\\sqrt` is not one of them: its argument is spaced.
_ARGUMENTS = {"frac": 2} | dict.fromkeys(
    "mathrm mathbf mathit mathcal mathsf mathtt text textrm textit textbf operatorname hat bar tilde "
    "vec dot ddot widehat widetilde overline underline".split(),
    1,
)
MAX_GROUP_DEPTH = 20  # braces nested deeper (only hostile input) are not spaced inside: no recursion
_MATH_TOKEN = re.compile(r"\s+|\\[A-Za-z]+|\\.|.", re.DOTALL)
_SPACE = "\x07"  # a space the spacing put in: kept apart from the source's until the end
# Symbols pylatexenc writes as nothing: they would vanish from the text (`a \\ne b` -> `a  b`).
_MISSING = {"ne": "≠", "neg": "¬", "bot": "⊥", "|": "‖"}
_MISSING_SYMBOL = re.compile(r"\\(ne|neg|bot)(?![A-Za-z])\s*|\\(\|)")
_OPENING = frozenset("left langle lfloor lceil big Big bigl".split())  # no space before these
_WORD = re.compile(r"\\(?:([A-Za-z]+)(\s*)|.)", re.DOTALL)
_BRACE = {"\\{": "\x05", "\\}": "\x06"}
_TO_TEXT = LatexNodes2Text(math_mode="text", strict_latex_spaces=False)
_SUB = str.maketrans("0123456789+-=()aeoxhklmnpst", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₒₓₕₖₗₘₙₚₛₜ")
_SUP = str.maketrans("0123456789+-=()in", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁱⁿ")
_SCRIPT = re.compile(r"([_^])(\{([^{}]*)\}|\\[A-Za-z]+|.)")
_ORDINALS = frozenset({"st", "nd", "rd", "th"})


def _script(match: re.Match[str], rich: bool = False) -> str:
    """A sub- or superscript in Unicode (`x^2` -> `x²`); where Unicode has none for every
    character, `<sup>`/`<sub>` in CSL's `rich` text, else the plain mark (`\\alpha_i` -> `α_i`),
    but for an ordinal (`19^{th}` -> `19th`)."""
    kind, whole, inner = match.group(1), match.group(2), match.group(3)
    body = inner if inner is not None else whole
    table = _SUB if kind == "_" else _SUP
    translated = body.translate(table)
    if all(ch != orig or ch.isspace() for ch, orig in zip(translated, body, strict=True)):
        return translated
    if rich:
        return f"<sup>{body}</sup>" if kind == "^" else f"<sub>{body}</sub>"
    if kind == "^" and body in _ORDINALS and match.string[: match.start()][-1:].isdigit():
        return body
    return kind + body  # no Unicode sub/superscript for every character: keep the plain mark


def _word(match: re.Match[str]) -> str:
    """A control word as TeX ends it, made explicit for the text conversion, where a space after
    it would be lost and a letter would join its name."""
    name = match.group(1)
    if name is None:  # a control symbol, `\\{`
        return match.group(0)
    text = match.string
    before, after = text[match.start() - 1 : match.start()], text[match.end() : match.end() + 1]
    if name in OPERATORS:
        # Spaced from an operand on either side, as LaTeX prints it: `n\\log n` -> `n log n`,
        # `\\sin\\theta` -> `sin θ`; not from a parenthesis: `\\log(n)` -> `log(n)`.
        command = re.match(r"\\([A-Za-z]+)", text[match.end() :])
        operand = after.isalnum() or after == "{" or bool(command and command.group(1) not in _OPENING)
        previous = re.search(r"\\([A-Za-z]+)$", text[: match.start()])  # `\\log\\log`: one space
        lead = (before.isalnum() or before in (")", "]", "}")) and not (
            previous and previous.group(1) in OPERATORS
        )
        return (" " if lead else "") + name + (" " if operand else "")
    if after in ("_", "^") or (after.isalpha() and not after.isascii()):
        return f"\\{name}{{}}"  # `\\sigma_n`: `_n` becomes `ₙ`, a letter that would join the name
    return match.group(0)


@dataclass
class _Atom:
    """One atom of a formula, with what TeX's spacing needs to know of it."""

    text: str  # the source, with its scripts and arguments
    kind: str
    gap: str = ""  # the source's whitespace before it
    sign: bool = False  # a binary operator with no operand before it: glued to what follows


def _group_end(tokens: list[str], start: int) -> int:
    """The index of the `}` that closes the `{` at `start` (the end, if none does)."""
    depth = 0
    for i in range(start, len(tokens)):
        if tokens[i] == "{":
            depth += 1
        elif tokens[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(tokens)


def _atoms(body: str, depth: int = 0) -> tuple[list[_Atom], str]:
    """The formula's atoms and the whitespace after the last. A script (`_2`, `^{n-1}`) and a
    set-apart argument (`\\frac{a-b}{2}`, `\\text{state-of-the-art}`) join their atom as written; a
    braced group is one atom, spaced inside; `\\left`, `\\big` join the delimiter after them."""
    tokens = _MATH_TOKEN.findall(body)
    atoms: list[_Atom] = []
    gap = prefix = prefix_gap = ""
    arguments = 0
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if tok.isspace():
            gap += tok
            continue
        if tok == "{":
            end = _group_end(tokens, i - 1)
            inner, closing = "".join(tokens[i:end]), "}" if end < len(tokens) else ""
            i = end + 1
            spaced = not arguments and depth < MAX_GROUP_DEPTH
            tok = "{" + (_spaced(inner, depth + 1) if spaced else inner) + closing
        elif tok in ("_", "^"):
            while i < len(tokens) and tokens[i].isspace():
                tok += tokens[i]
                i += 1
            if i < len(tokens):
                end = _group_end(tokens, i) if tokens[i] == "{" else i
                tok += "".join(tokens[i : end + 1])
                i = end + 1
            if atoms and not prefix:
                atoms[-1].text += gap + tok
                gap = ""
                continue
        if arguments and atoms and not prefix:
            atoms[-1].text += gap + tok
            gap, arguments = "", arguments - 1
            continue
        name = tok[1:] if tok.startswith("\\") else None
        if name in _DELIMITER_SIZE:
            if not prefix:
                prefix_gap, gap = gap, ""
            prefix += gap + tok
            gap = ""
            continue
        kind = _COMMAND_CLASS.get(name, _ORD) if name is not None else _CHAR_CLASS.get(tok, _ORD)
        if prefix:
            tok, gap, prefix = prefix + gap + tok, prefix_gap, ""
        atoms.append(_Atom(tok, kind, gap))
        gap, arguments = "", _ARGUMENTS.get(name or "", 0)
    if prefix:
        atoms.append(_Atom(prefix, _ORD, prefix_gap))
    return atoms, gap


def _spaced(body: str, depth: int = 0) -> str:
    """The formula with one space (`_SPACE`) each side of a relation or binary operator, as TeX
    sets them (`a=b` -> `a = b`, `\\alpha \\pm 0.1` -> `α ± 0.1`): none between two relations
    (`:=`), none after a sign (`-1`, `= -b`), none inside a script (`\\sum_{i=1}`); every other
    space as the source has it."""
    atoms, tail = _atoms(body, depth)
    previous: _Atom | None = None
    for atom in atoms:
        if atom.kind == _GLUE:
            continue
        if atom.kind == _BIN and (previous.kind if previous else None) in _NO_OPERAND_BEFORE:
            atom.kind, atom.sign = _ORD, True  # TeX's rule 5: a sign, not an operator
        elif atom.kind in (_REL, _COLON, _CLOSE, _PUNCT) and previous and previous.kind == _BIN:
            previous.kind = _ORD  # rule 6: nothing after it to operate on
        previous = atom
    if previous and previous.kind == _BIN:
        previous.kind = _ORD
    out: list[str] = []
    for before, atom in zip([None, *atoms], atoms, strict=False):
        out.append(_gap(before, atom) + atom.text)
    return "".join(out) + tail


def _gap(before: _Atom | None, atom: _Atom) -> str:
    """The space between two atoms: TeX's, where it is a relation's or an operator's."""
    if before is None:
        return atom.gap
    if before.sign:  # a control word still needs its space to end: `\\pm x` (TeX drops it anyway)
        return atom.gap if re.search(r"\\[A-Za-z]+$", before.text) else ""
    kinds = {before.kind, atom.kind}
    if _GLUE in kinds or (atom.kind == _PUNCT and before.kind == _REL):
        return atom.gap
    if kinds <= {_REL, _COLON}:
        return "" if _REL in kinds else atom.gap
    return _SPACE if kinds & {_REL, _BIN} else atom.gap


def math_text(body: str, rich: bool = False) -> str:
    """The inside of a math span as readable Unicode: `_2` -> `₂`, `\\lambda` -> `λ`, `\\log n`
    -> `log n` (an operator name keeps the space LaTeX prints after it), `a=b` -> `a = b` and
    `\\alpha\\pm 0.1` -> `α ± 0.1` (a relation or binary operator has a space each side, as LaTeX
    prints it; a sign has none: `-1`). `rich`: a script Unicode lacks is `<sup>`/`<sub>`."""
    body = _MISSING_SYMBOL.sub(lambda m: _MISSING[m.group(1) or m.group(2)], body.replace(_SPACE, ""))
    for brace, mark in _BRACE.items():  # literal braces stay; grouping braces go
        body = body.replace(brace, mark)
    body = _SCRIPT.sub(lambda m: _script(m, rich), _WORD.sub(_word, _spaced(body)))
    try:
        text = str(_TO_TEXT.latex_to_text(body))
    except Exception:  # pylatexenc gives up on some damaged input; keep the text then
        text = body
    text = text.replace("{", "").replace("}", "")
    for brace, mark in _BRACE.items():
        text = text.replace(mark, brace[1])
    return re.sub(f"[ {_SPACE}]*{_SPACE}[ {_SPACE}]*", " ", text)  # one space, never two
