"""Unicode text as LaTeX for .bib files, and the LaTeX in stored text (math) as readable text.

What BibTeX and biber need from a field, whatever the input:
- braces balanced: both count `{` and `}` and ignore the backslash before them, so a lone
  literal brace (an abstract cut inside `\\footnote{`) is written `\\textbraceleft{}`, never
  `\\{`; literal braces that pair up stay `\\{...\\}`;
- accents that survive biber's decoding: `í` is `{\\'i}`, not `{\\'\\i}` (biber reads that as a
  dotless i and a combining accent, which pdflatex cannot print); a combining mark with no
  precomposed character is dropped, for the same reason;
- math kept as math: a `$...$` span made of ordinary math (letters, digits, operators, Greek
  letters and the usual math commands) is written as it is, brace-protected against
  lowercasing; any other `$` is a dollar sign;
- for pdflatex, whichever dialect: in the UTF-8 one (biblatex) a character stays UTF-8 only if
  pdflatex's utf8 input encoding knows it with T1 fonts (accented Latin letters, typographic
  punctuation); Greek letters and math symbols are macros (`\\ensuremath{\\lambda}`) in both.

Every prose field (title, abstract, venue, series, note, publisher...) is decoded once into
runs, then written per consumer: `escape` for a .bib, `readable` for plain text (RIS, Markdown,
HTML, CSV), `rich`/`readable_title` for CSL-JSON's rich text. A stored text holds Unicode with
math as `$...$` (what the BibTeX importer keeps); text from older stores and other sources may
still hold a LaTeX escape of a special character (`30\\%`) or a formatting command with its
argument (`\\emph{not}`), which are read as such. Nothing else is: a backslash before anything
else is a backslash (`\\cmd`, `C:\\data`), written `{\\textbackslash}` in a .bib.
"""

from __future__ import annotations

import bisect
import logging
import re
import unicodedata
from dataclasses import dataclass, field

from pylatexenc.latexencode import RULE_DICT, UnicodeToLatexConversionRule, UnicodeToLatexEncoder

from assistant.export.mathtext import MAX_GROUP_DEPTH, OPERATORS, math_text

logging.getLogger("pylatexenc.latexencode").setLevel(logging.ERROR)
logging.getLogger("pylatexenc.latexwalker").setLevel(logging.ERROR)

_ACCENTS = {
    "\u0300": "`",
    "\u0301": "'",
    "\u0302": "^",
    "\u0303": "~",
    "\u0304": "=",
    "\u0306": "u",
    "\u0307": ".",
    "\u0308": '"',
    "\u030a": "r",
    "\u030b": "H",
    "\u030c": "v",
    "\u0323": "d",
    "\u0327": "c",
    "\u0328": "k",
}


def _accent_rules() -> dict[int, str]:
    """A Latin letter with one accent as a braced macro, `{\\"O}`, `{\\c s}`: BibTeX takes a
    braced group that starts with a backslash for one letter (initials, sorting), and `í` is
    `{\\'i}`, what biber decodes back to `í` (`{\\'\\i}` it reads as a dotless i and a combining
    accent, which pdflatex cannot print)."""
    rules: dict[int, str] = {}
    for code in [*range(0xC0, 0x250), *range(0x1E00, 0x1F00)]:
        decomposed = unicodedata.normalize("NFD", chr(code))
        if len(decomposed) == 2 and decomposed[0].isascii() and decomposed[1] in _ACCENTS:
            cmd = _ACCENTS[decomposed[1]]
            sep = " " if cmd.isalpha() else ""
            rules[code] = f"{{\\{cmd}{sep}{decomposed[0]}}}"
    return rules


_DOTLESS = re.compile(r"\\(['`^\"~=.uvH])\s*(\{\s*)?\\([ij])(?![A-Za-z])(\s*\})?")


def dotted_i(raw: str) -> str:
    """`{\\'\\i}`, `\\'{\\i}` -> `{\\'i}`, `\\'{i}`: accents on i and j that biber decodes to the
    accented letter."""
    return _DOTLESS.sub(lambda m: f"\\{m.group(1)}{m.group(2) or ''}{m.group(3)}{m.group(4) or ''}", raw)


_ASCII = UnicodeToLatexEncoder(
    conversion_rules=[
        # A straight double quote stays one (pylatexenc would make it a closing curly quote);
        # a bar is a dash in LaTeX's default font encoding unless it is math.
        UnicodeToLatexConversionRule(
            rule_type=RULE_DICT,
            rule={ord('"'): '{"}', ord("|"): "\\ensuremath{|}", **_accent_rules()},
        ),
        "defaults",
    ],
    non_ascii_only=False,
    unknown_char_policy="keep",
)
# The characters beyond ASCII that pdflatex's utf8 input encoding knows with T1 fonts: those
# LaTeX's t1enc.dfu, ts1enc.dfu, ot1enc.dfu and omsenc.dfu declare (TeX Live 2022). Any other
# (`λ`, `∞`, `ả`) stops pdflatex: "Unicode character λ (U+03BB) not set up for use with LaTeX".
_PDFLATEX_UTF8 = frozenset(
    [chr(c) for c in range(0xA1, 0x17F) if c not in (0x126, 0x127, 0x138, 0x13F, 0x140, 0x149, 0x166, 0x167)]
    + list(
        "ƒǄǅǆǇǈǉǊǋǌǍǎǏǐǑǒǓǔǢǣǦǧǨǩǪǫǰǴǵȘșȚțȲȳȷˇ˘˙˛˝฿ḂḃḍḞḟḠḡḥḰḱḷṃṅṇṛṣṭẎẏẐẑẞỲỳ\u200c‐‑‒–—―‖‘’‚“”„†‡•‰"
        "‱‹›※‽⁄⁎⁒₡₤₦₩₫€₱℃№℗℞℠™\u2126℧℮←↑→↓\u2329\u232a␢␣◦◯♪⟨⟩〈〉ﬀﬁﬂﬃﬄﬅﬆ"
    )
)


def pdflatex_utf8(text: str) -> bool:
    """Whether pdflatex (utf8 input, T1 fonts) prints every character of `text` as it is."""
    return all(ch.isascii() or ch in _PDFLATEX_UTF8 for ch in text)


# UTF-8 where pdflatex knows the character (see `_PDFLATEX_UTF8`), else what the ASCII
# encoder writes: an accent macro (`ẹ` -> `{\\d e}`) or a symbol (`λ` -> `\\ensuremath{\\lambda}`).
_UTF8 = UnicodeToLatexEncoder(
    conversion_rules=[
        UnicodeToLatexConversionRule(
            rule_type=RULE_DICT,
            rule={
                **{c: chr(c) for c in range(0x80)},
                **{ord(ch): ch for ch in _PDFLATEX_UTF8},
                ord('"'): '{"}',
                ord("|"): "\\ensuremath{|}",
                ord("\\"): "{\\textbackslash}",
                ord("~"): "{\\textasciitilde}",
                ord("^"): "{\\textasciicircum}",
                ord("<"): "{\\textless}",
                ord(">"): "{\\textgreater}",
                **{ord(c): "\\" + c for c in "%&#_$"},
                ord("\u00a0"): "~",
            },
        ),
        UnicodeToLatexConversionRule(rule_type=RULE_DICT, rule=_accent_rules()),
        "defaults",
    ],
    non_ascii_only=False,
    unknown_char_policy="keep",
)
_LIGATURE = re.compile(r"([-'`])(?=\1)")  # `--`, `''`, ``` `` ``` are dashes and quotes in TeX

# Math a .bib may carry as math: what compiles with amsmath loaded or without, and nothing that
# reads or writes files or defines commands.
_GREEK = (
    "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi pi "
    "varpi rho varrho sigma varsigma tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi "
    "Pi Sigma Upsilon Phi Psi Omega"
)
# Operator names (`\\log`, `\\sin`, ...): upright words, as LaTeX's kernel defines them.
_MATH_COMMANDS = OPERATORS | frozenset(
    (
        _GREEK + " mathrm mathbf mathit mathcal mathsf mathtt text textrm textit textbf operatorname "
        "frac sqrt cdot cdots ldots dots times div pm mp leq geq le ge neq ne approx sim simeq equiv "
        "propto infty sum prod int partial nabla ell hbar log ln exp sin cos tan min max lim sup inf "
        "to rightarrow leftarrow leftrightarrow Rightarrow Leftarrow mapsto in notin subset subseteq "
        "supset cup cap setminus emptyset forall exists neg wedge vee oplus otimes odot circ bullet "
        "star ast prime dagger langle rangle lfloor rfloor lceil rceil left right big Big bigl bigr "
        "hat bar tilde vec dot ddot widehat widetilde overline underline mid parallel perp angle "
        "deg top bot lesssim gtrsim ll gg sqrt quad qquad , ; ! { } _ % & # $ | "
    ).split()
)
# A math span: `$x$`, no space inside its dollars (`$5 and $10` is money); or `$ 19^{th} $`, spaced
# inside, if it holds a mark of math (a command, a script, a group) that money never has.
_MATH_SPAN = re.compile(
    r"(?<![\\$])\$(?:(?=[^\s$])((?:\\.|[^$\\])+?)(?<=[^\s\\])"
    r"|(\s*(?:\\.|[^$\\])*?(?:\\[A-Za-z]|[_^{])(?:\\.|[^$\\])*?))\$(?![\d$])"
)
_COMMAND = re.compile(r"\\([A-Za-z]+|.)")
_TEXT_COMMANDS = frozenset(
    "' ` ^ \" ~ = . u v H c d b t k r i j o O l L ss ae AE oe OE aa AA & % $ # _ { } , ; ! - / @ "
    "textit textbf textsc textrm textsf texttt emph textsuperscript textsubscript textendash "
    "textemdash textquotedblleft textquotedblright textquoteleft textquoteright textbackslash "
    "textasciitilde textasciicircum textbraceleft textbraceright textless textgreater textbar "
    "ldots dots ensuremath mbox url LaTeX TeX BibTeX relax space nobreakspace".split()
)


def balanced(text: str) -> bool:
    """Whether BibTeX would read `text` as one field: braces paired, counting escaped ones."""
    depth = 0
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _safe_math(body: str) -> bool:
    if not balanced(body) or "%" in body.replace("\\%", "") or "#" in body.replace("\\#", ""):
        return False
    if "&" in body.replace("\\&", ""):
        return False
    return all(m.group(1) in _MATH_COMMANDS for m in _COMMAND.finditer(body))


def math_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each `$...$` span of `text` that is safe to write as math. A span opens
    at a `$` followed by a non-space and closes at a `$` after a non-space that no digit
    follows (so `$5 and $10` is money, not math); one spaced inside its dollars (`$ 19^{th} $`,
    as some .bib files write it) is math if it holds a command, a script or a group."""
    return [(m.start(), m.end()) for m in _MATH_SPAN.finditer(text) if _safe_math(m.group(1) or m.group(2))]


def _strip_combining(text: str) -> str:
    if text.isascii():  # nothing to compose or strip (most titles and abstracts)
        return text
    text = unicodedata.normalize("NFC", text)
    return "".join(ch for ch in text if not unicodedata.combining(ch))


def _escape_braces(text: str) -> str:
    """Literal braces as LaTeX: pairs as `\\{...\\}`, a lone one as `\\textbraceleft{}`."""
    if "{" not in text and "}" not in text:
        return text
    opened: list[int] = []
    lone: set[int] = set()
    for i, ch in enumerate(text):
        if ch == "{":
            opened.append(i)
        elif ch == "}":
            if opened:
                opened.pop()
            else:
                lone.add(i)
    lone.update(opened)
    out = []
    for i, ch in enumerate(text):
        if ch in "{}":
            if i in lone:
                out.append("\x02" if ch == "{" else "\x03")
            else:
                out.append("\x00" if ch == "{" else "\x01")  # escaped after encoding
        else:
            out.append(ch)
    return "".join(out)


def _unchanged(encoder: UnicodeToLatexEncoder) -> frozenset[str]:
    """The ASCII characters an encoder writes as themselves. Its rules map one character at a
    time, so a text of only these is its own encoding (the encoder, a few microseconds a
    character, is most of writing a .bib)."""
    return frozenset(ch for ch in map(chr, range(0x80)) if encoder.unicode_to_latex(ch) == ch)


_SAME = {True: _unchanged(_UTF8), False: _unchanged(_ASCII)}


class _Characters(dict[str, str | None]):
    """What an encoder writes for each character, asked of it once per character. Its rules
    (dictionaries of single characters) map one character at a time, after it puts the text in
    NFC: encoding a text is its NFC form written character by character. None: a character
    that is not its own NFC form (it cannot occur in an NFC text; the encoder is asked then)."""

    def __init__(self, encoder: UnicodeToLatexEncoder) -> None:
        super().__init__()
        self.encoder = encoder

    def __missing__(self, ch: str) -> str | None:
        value = str(self.encoder.unicode_to_latex(ch)) if unicodedata.normalize("NFC", ch) == ch else None
        self[ch] = value
        return value

    def encode(self, text: str) -> str:
        """`encoder.unicode_to_latex(text)`, without its per-character overhead."""
        text = unicodedata.normalize("NFC", text)
        parts = [self[ch] for ch in text]
        if None in parts:
            return str(self.encoder.unicode_to_latex(text))
        return "".join(parts)  # type: ignore[arg-type]


_CHARACTERS = {True: _Characters(_UTF8), False: _Characters(_ASCII)}


def _encode_text(text: str, utf8: bool) -> str:
    text = _escape_braces(_strip_combining(re.sub(r"[\x00-\x03]", "", text)))
    if _SAME[utf8].issuperset(text):
        encoded = text
    else:
        encoded = _CHARACTERS[utf8].encode(text)
    encoded = encoded.replace("\x00", "\\{").replace("\x01", "\\}")
    encoded = encoded.replace("\x02", "\\textbraceleft{}").replace("\x03", "\\textbraceright{}")
    return _LIGATURE.sub(r"\1{}", encoded)


# What a stored text may still hold of LaTeX's text mode (see the module's docstring): a special
# character escaped, and a formatting command around a braced argument. Each command is written
# back to a .bib as it is; CSL-JSON has markup for some (`<i>`, `<b>`, `<sup>`).
_ESCAPED = re.compile(r"\\([%&#_${}])")
_FORMATTING = {
    "emph": "<i>",
    "textit": "<i>",
    "textsl": "<i>",
    "textbf": "<b>",
    "textsc": '<span style="font-variant:small-caps;">',
    "textsuperscript": "<sup>",
    "textsubscript": "<sub>",
    "textrm": "",
    "textsf": "",
    "texttt": "",
    "textup": "",
    "textnormal": "",
    "mbox": "",
}
_FORMAT_COMMAND = re.compile(r"(?<!\\)\\(" + "|".join(_FORMATTING) + r")\s*\{")


@dataclass
class _Run:
    """A piece of a prose field: text, a math span (with its dollars), or a formatting command."""

    kind: str  # "text", "math" or the command's name
    text: str = ""
    inner: list[_Run] = field(default_factory=list)


def _brace_pairs(text: str) -> dict[int, int]:
    """Index of each `{` -> index of the `}` that closes it, escaped braces not counting."""
    pairs: dict[int, int] = {}
    opened: list[int] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            opened.append(i)
        elif ch == "}" and opened:
            pairs[opened.pop()] = i
        i += 1
    return pairs


def _plain_runs(text: str) -> list[_Run]:
    out: list[_Run] = []
    at = 0
    for start, end in math_spans(text):
        if start > at:
            out.append(_Run("text", text[at:start]))
        out.append(_Run("math", text[start:end]))
        at = end
    if at < len(text):
        out.append(_Run("text", text[at:]))
    return out


def _commands(text: str, spans: list[tuple[int, int]]) -> list[tuple[re.Match[str], int]]:
    """The formatting commands of `text` outside its math `spans`, each with the index of the
    brace that closes its argument: only whole ones (argument closed, no math span cut)."""
    starts = [start for start, _ in spans]

    def in_math(i: int) -> bool:
        at = bisect.bisect_right(starts, i) - 1
        return at >= 0 and i < spans[at][1]

    pairs = _brace_pairs(text)
    out: list[tuple[re.Match[str], int]] = []
    at = 0
    for match in _FORMAT_COMMAND.finditer(text):
        close = pairs.get(match.end() - 1)
        if match.start() < at or close is None or in_math(match.start()) or in_math(close):
            continue
        out.append((match, close))
        at = close + 1
    return out


def _runs(text: str, depth: int = 0) -> list[_Run]:
    """The text as runs; a formatting command that is not whole is text, backslash and all."""
    if depth >= MAX_GROUP_DEPTH or "\\" not in text:
        return _plain_runs(text)
    out: list[_Run] = []
    at = 0
    for match, close in _commands(text, math_spans(text)):
        out += _plain_runs(text[at : match.start()])
        out.append(_Run(match.group(1), inner=_runs(text[match.end() : close], depth + 1)))
        at = close + 1
    out += _plain_runs(text[at:])
    return out


def _unescape(text: str) -> str:
    return _ESCAPED.sub(r"\1", text)


def _latex(runs: list[_Run], utf8: bool, protect_math: bool) -> str:
    out = []
    for run in runs:
        if run.kind == "text":
            out.append(_encode_text(_unescape(run.text), utf8))
        elif run.kind == "math":
            out.append(f"{{{run.text}}}" if protect_math else run.text)
        else:
            out.append(f"\\{run.kind}{{{_latex(run.inner, utf8, protect_math)}}}")
    return "".join(out)


def escape(text: str, utf8: bool = False, protect_math: bool = True) -> str:
    """Unicode text as a brace-balanced LaTeX field value that prints the same characters.
    `utf8`: letters pdflatex knows stay UTF-8 (for biber); else they are LaTeX accents (for
    BibTeX). A special character the text still escapes (`30\\%`) is not escaped twice, and a
    formatting command (`\\emph{...}`) stays one."""
    return _latex(_runs(text), utf8, protect_math)


def safe_raw(raw: str) -> bool:
    """Whether LaTeX as a .bib source wrote it can be written back as it is: balanced, no
    commands beyond accents, letters, escapes and formatting (math as `math_spans` allows), and
    none of the characters LaTeX would read as markup outside math."""
    if not balanced(raw) or re.search(r"\\['`^\"~=.uvHcdbtkr]\s*\{?\s*\\[ij]\b", raw):
        return False
    spans = math_spans(raw)
    outside = []
    at = 0
    for start, end in spans:
        outside.append(raw[at:start])
        at = end
    outside.append(raw[at:])
    text = " ".join(outside)
    if re.search(r"(?<!\\)[%&#_^$]", text) or "\n\n" in text:
        return False
    return all(m.group(1) in _TEXT_COMMANDS for m in _COMMAND.finditer(text))


_MARKS = re.compile("[\x04\x0e\x0f\x10\x11]")  # what `readable_title` marks math and markup with
_WORD_END = re.compile("(\x10[^\x11]*\x11| )")  # a space or markup ends a word


def _text(runs: list[_Run], rich: bool, mark: bool = False) -> str:
    """The runs as text: escapes and formatting read, math as `math_text`; `rich`: formatting
    as CSL's markup; `mark`: each math run between \\x0e and \\x0f with its spaces as \\x04,
    each tag of markup between \\x10 and \\x11 (for `readable_title`)."""
    out = []
    for run in runs:
        if run.kind == "text":
            out.append(_unescape(run.text))
        elif run.kind == "math":
            shown = math_text(run.text[1:-1].strip(), rich)
            out.append("\x0e" + shown.replace(" ", "\x04") + "\x0f" if mark else shown)
        else:
            inner = _text(run.inner, rich, mark)
            tag = _FORMATTING[run.kind] if rich else ""
            if tag:
                closing = "</" + tag[1:].split(" ")[0].rstrip(">") + ">"
                if mark:
                    tag, closing = f"\x10{tag}\x11", f"\x10{closing}\x11"
                inner = tag + inner + closing
            out.append(inner)
    return "".join(out)


def readable(text: str) -> str:
    """Plain text (RIS, Markdown, HTML, CSV): each math span as readable Unicode (`H$_2$O` ->
    `H₂O`, `$\\lambda$` -> `λ`, `$ 19^{th} $` -> `19th`), a special character's escape as the
    character (`30\\%` -> `30%`), a formatting command as its text; everything else as it is."""
    if "$" not in text and "\\" not in text:
        return text
    return _text(_runs(text), rich=False)


def rich(text: str) -> str:
    """`readable` in CSL-JSON's rich text, for a title or a container's: a script Unicode lacks
    as `<sup>`/`<sub>` (`$ 19^{th} $` -> `19<sup>th</sup>`), `\\emph{x}` as `<i>x</i>`."""
    if "$" not in text and "\\" not in text:
        return text
    return _text(_runs(text), rich=True)


def _has_math(runs: list[_Run]) -> bool:
    return any(run.kind == "math" or _has_math(run.inner) for run in runs)


def readable_title(text: str) -> str:
    """`rich` for a CSL-JSON title: a word that held math is kept from title-casing
    (`<span class="nocase">H₂O</span>`, CSL's rich-text markup, which citeproc and Zotero read)."""
    if "$" not in text and "\\" not in text:
        return text
    runs = _runs(_MARKS.sub("", text))
    if not _has_math(runs):
        return _text(runs, rich=True)
    words = _WORD_END.split(_text(runs, rich=True, mark=True))
    shown = "".join(f'<span class="nocase">{w}</span>' if "\x0e" in w else w for w in words)
    return _MARKS.sub(lambda m: " " if m.group() == "\x04" else "", shown)


def math_words(text: str) -> list[str]:
    """The text split at its spaces, a math span or a formatting command with its argument
    (`\\emph{in a word}`) counting as one word whatever spaces it holds."""
    masked = list(text)
    spans = math_spans(text)
    whole = [(m.start(), close + 1) for m, close in _commands(text, spans)] if "\\" in text else []
    for start, end in [*spans, *whole]:
        for i in range(start, end):
            if masked[i] == " ":
                masked[i] = "\x04"
    return [token.replace("\x04", " ") for token in "".join(masked).split(" ")]
