"""LaTeX macros in BibTeX fields that a LaTeX-to-text decoder does not know, expanded first.

Three kinds: a file's own `\\newcommand`/`\\def` definitions in its `@preamble`, the journal
macros of AASTeX (`aas_macros.sty`: `\\apj`, `\\mnras`...) that ADS exports put in `journal`,
and a few common text macros. Any other macro the decoder does not know is made visible as
written (`\\van{Gemund}{Van}{van}`) rather than dropped with its arguments glued together.

Expansion is bounded: a macro met inside its own expansion (`\\def\\a{\\a\\a}`, which LaTeX
would expand for ever) is shown as written, and a `Budget` caps the characters expansion may
produce in one field and in one file, so that macros that multiply (`\\def\\b{\\c\\c\\c}`, ...)
stop there; what is left is read as written.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from assistant.ingest.limits import EXPANDED, EXPANDED_FILE, NESTING


@dataclass(frozen=True)
class Macro:
    """A macro with `args` arguments (`#1`...) that expands to `body` (LaTeX)."""

    body: str
    args: int = 0
    default: str | None = None  # the first argument is optional (`[default]`) when set


# The journal macros of aas_macros.sty (AAS / ADS), as the journals' full names.
JOURNALS: dict[str, str] = {
    "aj": "The Astronomical Journal",
    "actaa": "Acta Astronomica",
    "araa": "Annual Review of Astronomy and Astrophysics",
    "apj": "The Astrophysical Journal",
    "apjl": "The Astrophysical Journal Letters",
    "apjs": "The Astrophysical Journal Supplement Series",
    "ao": "Applied Optics",
    "apss": "Astrophysics and Space Science",
    "aap": "Astronomy and Astrophysics",
    "aapr": "Astronomy and Astrophysics Review",
    "aaps": "Astronomy and Astrophysics Supplement Series",
    "azh": "Astronomicheskii Zhurnal",
    "baas": "Bulletin of the American Astronomical Society",
    "bac": "Bulletin of the Astronomical Institutes of Czechoslovakia",
    "caa": "Chinese Astronomy and Astrophysics",
    "cjaa": "Chinese Journal of Astronomy and Astrophysics",
    "icarus": "Icarus",
    "jcap": "Journal of Cosmology and Astroparticle Physics",
    "jrasc": "Journal of the Royal Astronomical Society of Canada",
    "memras": "Memoirs of the Royal Astronomical Society",
    "mnras": "Monthly Notices of the Royal Astronomical Society",
    "na": "New Astronomy",
    "nar": "New Astronomy Reviews",
    "pra": "Physical Review A",
    "prb": "Physical Review B",
    "prc": "Physical Review C",
    "prd": "Physical Review D",
    "pre": "Physical Review E",
    "prl": "Physical Review Letters",
    "pasa": "Publications of the Astronomical Society of Australia",
    "pasp": "Publications of the Astronomical Society of the Pacific",
    "pasj": "Publications of the Astronomical Society of Japan",
    "rmxaa": "Revista Mexicana de Astronomía y Astrofísica",
    "qjras": "Quarterly Journal of the Royal Astronomical Society",
    "skytel": "Sky and Telescope",
    "solphys": "Solar Physics",
    "sovast": "Soviet Astronomy",
    "ssr": "Space Science Reviews",
    "zap": "Zeitschrift für Astrophysik",
    "nat": "Nature",
    "iaucirc": "IAU Circulars",
    "aplett": "Astrophysical Letters",
    "apspr": "Astrophysics and Space Physics Research",
    "bain": "Bulletin of the Astronomical Institutes of the Netherlands",
    "fcp": "Fundamentals of Cosmic Physics",
    "gca": "Geochimica et Cosmochimica Acta",
    "grl": "Geophysical Research Letters",
    "jcp": "The Journal of Chemical Physics",
    "jgr": "Journal of Geophysical Research",
    "jqsrt": "Journal of Quantitative Spectroscopy and Radiative Transfer",
    "memsai": "Memorie della Società Astronomica Italiana",
    "nphysa": "Nuclear Physics A",
    "physrep": "Physics Reports",
    "physscr": "Physica Scripta",
    "planss": "Planetary and Space Science",
    "procspie": "Proceedings of the SPIE",
    "psj": "The Planetary Science Journal",
    "jaavso": "Journal of the American Association of Variable Star Observers",
    "maps": "Meteoritics and Planetary Science",
    "aas": "American Astronomical Society Meeting Abstracts",
    "dps": "AAS/Division for Planetary Sciences Meeting Abstracts",
}
JOURNALS.update(
    astap=JOURNALS["aap"], apjlett=JOURNALS["apjl"], apjsupp=JOURNALS["apjs"], applopt=JOURNALS["ao"]
)

# Text macros the decoder would drop or glue (names in fields, the TeX logos, PDF strings).
BUILTIN: dict[str, Macro] = {
    **{name: Macro(text) for name, text in JOURNALS.items()},
    "TeX": Macro("TeX"),
    "LaTeX": Macro("LaTeX"),
    "LaTeXe": Macro("LaTeX2e"),
    "BibTeX": Macro("BibTeX"),
    "XeTeX": Macro("XeTeX"),
    "LuaTeX": Macro("LuaTeX"),
    "texorpdfstring": Macro("#2", 2),
    "mkbibquote": Macro("“#1”", 1),
    "enquote": Macro("“#1”", 1),
    "mkbibemph": Macro("#1", 1),
    "mkbibbold": Macro("#1", 1),
    "mkbibitalic": Macro("#1", 1),
    "mkbibacro": Macro("#1", 1),
    "hyphen": Macro("-"),
    "nbhyphen": Macro("-"),
    "nocase": Macro("#1", 1),
    "NoCaseChange": Macro("#1", 1),
    "uline": Macro("#1", 1),
    "textcyrillic": Macro("#1", 1),
    "t": Macro("#1", 1),  # the tie accent over two letters
    "doi": Macro("#1", 1),
    "textunderscore": Macro("\\_"),
    "textless": Macro("<"),
    "textgreater": Macro(">"),
    "textbar": Macro("|"),
    "slash": Macro("/"),
    "S": Macro("§"),
    "P": Macro("¶"),
    "ddag": Macro("‡"),
    "pounds": Macro("£"),
    "euro": Macro("€"),
    "copyright": Macro("©"),
    "guillemetleft": Macro("«"),
    "guillemetright": Macro("»"),
}

# Macros the decoder knows it may drop (font and size switches, spacing, no-ops).
SILENT = frozenset(
    "em it bf sc rm tt sf sl up md normalfont bfseries itshape scshape upshape mdseries slshape "
    "rmfamily sffamily ttfamily tiny scriptsize footnotesize small normalsize large Large LARGE huge "
    "Huge relax protect nobreak xspace unskip allowbreak hbox begin end item textsuperscript "
    "textsubscript textnormal MakeUppercase MakeLowercase MakeTextUppercase MakeTextLowercase "
    "uppercase lowercase nocite bibinfo bibnamefont bibfnamefont natexlab newblock ignorespaces "
    "penalty kern hskip vskip strut phantom noindent par newline linebreak cyr".split()
)

_TOKEN = re.compile(r"\\([A-Za-z]+)|\\.|\$\$?", re.DOTALL)
_CONTROL = re.compile(r"\\(?:[A-Za-z]+|.)", re.DOTALL)
_OPTIONAL = re.compile(r"\s*\[([^\]]*)\]")
_BRACED_NAME = re.compile(r"\{\s*\\([A-Za-z]+)\s*\}")
_NAME = re.compile(r"\\([A-Za-z]+)")
_PARAMS = re.compile(r"(?:#[1-9])*")
_COUNT = re.compile(r"\s*\[\s*([1-9])\s*\]")
_PARAM = re.compile(r"#([1-9])")
_DEPTH = 8  # macros expanding into macros: deep enough for real files, bounded for a loop


@dataclass
class Budget:
    """The characters macro expansion may still produce: in the field being read (`left`, set by
    `for_field`) and in the whole file (`file_left`). `over` says a field ran out; `looped` names
    the macros met inside their own expansion; `shown` the file's macros shown as written (those
    that expand into themselves: `looping`)."""

    left: int = EXPANDED
    file_left: int = EXPANDED_FILE
    over: bool = False
    looped: set[str] = field(default_factory=set)
    shown: frozenset[str] = frozenset()

    def for_field(self, limit: int = EXPANDED) -> Budget:
        """This budget, for the next field: at most `limit` characters, what the file has left."""
        self.left, self.over, self.looped = limit, False, set()
        return self

    def take(self, size: int) -> bool:
        """Whether `size` more characters may be produced (they are counted if so)."""
        if size > self.left or size > self.file_left:
            self.over = True
            return False
        self.left -= size
        self.file_left -= size
        return True


def _group_end(text: str, start: int) -> int:
    """The index just past the brace group opening at `start` (the text's end if unclosed)."""
    depth, i, n = 0, start, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def _argument(text: str, pos: int) -> tuple[str, int]:
    """One macro argument from `pos` (a brace group's content, or one token) and where it ends."""
    n = len(text)
    while pos < n and text[pos].isspace():
        pos += 1
    if pos >= n or text[pos] == "}":
        return "", pos
    if text[pos] == "{":
        end = _group_end(text, pos)
        return text[pos + 1 : end - 1] if text[end - 1 : end] == "}" else text[pos + 1 : end], end
    if text[pos] == "\\":
        m = _CONTROL.match(text, pos)
        if m is not None:
            return m.group(), m.end()
    return text[pos], pos + 1


def _optional(text: str, pos: int) -> tuple[str | None, int]:
    """An optional `[...]` argument at `pos`, if there is one."""
    m = _OPTIONAL.match(text, pos)
    return (m.group(1), m.end()) if m else (None, pos)


def _substituted(body: str, args: list[str]) -> str:
    """A macro's body with its arguments in place of `#1`...; a `#n` past them is dropped."""
    return _PARAM.sub(lambda m: args[int(m.group(1)) - 1] if int(m.group(1)) <= len(args) else "", body)


def expand(
    text: str,
    macros: Mapping[str, Macro],
    known: Collection[str],
    depth: int = 0,
    budget: Budget | None = None,
    active: frozenset[str] = frozenset(),
) -> str:
    """`text` with `macros` expanded and macros neither in `macros` nor `known` made visible:
    `\\name{a}{b}` becomes `\\textbackslash{}name\\{a\\}\\{b\\}`, which decodes to itself. Math
    (`$...$`) is left as it is. A macro inside its own expansion (`active`) is made visible too;
    once `budget` is spent (or `NESTING` levels are reached) the rest is left as written."""
    budget = Budget() if budget is None else budget
    if depth > NESTING:
        return text
    out: list[str] = []
    pos, math = 0, ""
    while (m := _TOKEN.search(text, pos)) is not None:
        out.append(text[pos : m.start()])
        token, name, pos = m.group(), m.group(1), m.end()
        if token.startswith("$"):
            math = "" if token == math else math or token
            out.append(token)
            continue
        if name is None or math:
            out.append(token)
            continue
        macro = macros.get(name)
        if macro is not None and name in active:
            budget.looped.add(name)  # LaTeX would expand it for ever: shown as written instead
        elif name in budget.shown:
            pass  # shown as written, whatever the decoder would make of it
        elif macro is not None and depth < _DEPTH and not budget.over:
            start = pos
            args: list[str] = []
            if not macro.args:  # as in LaTeX, a control word takes the spaces after it
                while pos < len(text) and text[pos].isspace():
                    pos += 1
            if macro.default is not None:
                given, pos = _optional(text, pos)
                args.append(macro.default if given is None else given)
            while len(args) < macro.args:
                arg, pos = _argument(text, pos)
                args.append(arg)
            body = _substituted(macro.body, args)
            if budget.take(len(body)):
                out.append("{" + expand(body, macros, known, depth + 1, budget, active | {name}) + "}")
                continue
            pos = start  # the budget is spent: this macro and the file's after it are shown as written
        elif macro is None and name in known or macro is not None and not budget.over:
            out.append(token)  # the decoder's own, or a macro nested too deep to expand
            continue
        out.append(r"\textbackslash{}" + name)
        while pos < len(text) and text[pos] == "{":  # its arguments, braces shown
            end = _group_end(text, pos)
            inner = text[pos + 1 : end - 1] if text[end - 1 : end] == "}" else text[pos + 1 : end]
            out.append(r"\{" + expand(inner, macros, known, depth + 1, budget, active) + r"\}")
            pos = end
    out.append(text[pos:])
    return "".join(out)


_DEFINITION = re.compile(r"\\(?:(?:re|provide)?newcommand\*?|def)\s*")


def preamble_macros(preamble: str) -> dict[str, Macro]:
    """The argument-less or `[n]`-argument macros a `@preamble` defines with `\\newcommand`,
    `\\renewcommand`, `\\providecommand` or `\\def` (`\\def\\name#1#2{...}` too)."""
    found: dict[str, Macro] = {}
    for m in _DEFINITION.finditer(preamble):
        pos, is_def = m.end(), m.group().startswith("\\def")
        braced = preamble.startswith("{", pos)
        name = (_BRACED_NAME if braced else _NAME).match(preamble, pos)
        if name is None:
            continue
        pos, args, default = name.end(), 0, None
        if is_def:
            params = _PARAMS.match(preamble, pos)
            if params is not None:
                args, pos = params.group().count("#"), params.end()
        else:
            count = _COUNT.match(preamble, pos)
            if count:
                args, pos = int(count.group(1)), count.end()
                default, pos = _optional(preamble, pos)
        while pos < len(preamble) and preamble[pos].isspace():
            pos += 1
        if not preamble.startswith("{", pos):
            continue
        end = _group_end(preamble, pos)
        found[name.group(1)] = Macro(preamble[pos + 1 : end - 1], args, default)
    return found


def looping(macros: Mapping[str, Macro]) -> set[str]:
    """The macros whose expansion comes back to themselves (`\\def\\a{\\a\\a}`, or `\\a` using
    `\\b` using `\\a`), which LaTeX would expand for ever: the strongly connected parts of the
    graph of which macro's body names which (Tarjan's algorithm, without recursion)."""
    refs = {name: [m for m in _NAME.findall(macro.body) if m in macros] for name, macro in macros.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[str] = set()
    for root in refs:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            name, child = work.pop()
            if child == 0:
                index[name] = low[name] = len(index)
                stack.append(name)
                on_stack.add(name)
            if child < len(refs[name]):
                work.append((name, child + 1))
                nxt = refs[name][child]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[name] = min(low[name], index[nxt])
                continue
            if low[name] == index[name]:
                part = set()
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    part.add(top)
                    if top == name:
                        break
                if len(part) > 1 or name in refs[name]:
                    found |= part
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[name])
    return found
