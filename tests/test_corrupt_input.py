"""Property: whatever damage a real file suffers, parsing raises nothing but InputError, located."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assistant.errors import InputError
from assistant.ingest import PARSERS, parse_file
from conftest import shared

FILES = {
    "bibtex": shared("realworld", "bibtex_bbt_export_901.bib"),
    "ris": shared("realworld", "ris_zotero_asreview.ris"),
    "csl-json": shared("realworld", "csljson_bbt_1179.json"),
    "arxiv": shared("realworld", "atom_arxiv_testing_2026.xml"),
    "json": shared("realworld", "s2_author_turing.json"),
    "listing": shared("listings", "s2-profile-titov.txt"),
}
JUNK = st.sampled_from(
    ["{", "}", '"', ",", "@", "<", ">", "&", "\n", "TY  - ", "ER  - ", "\\", "\x00", "é", "[", "]"]
)


@st.composite
def damaged(draw: st.DrawFn, text: str) -> str:
    lines = text.splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["truncate", "drop", "repeat", "junk", "swap"]))
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        if kind == "truncate":
            cut = draw(st.integers(0, len(lines[i])))
            lines = [*lines[:i], lines[i][:cut]]
        elif kind == "drop":
            del lines[i]
        elif kind == "repeat":
            lines.insert(i, lines[i])
        elif kind == "junk":
            pos = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:pos] + draw(JUNK) + lines[i][pos:]
        else:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


def _check(path: Path, fmt: str | None) -> None:
    try:
        _, result = parse_file(path, fmt)
    except InputError as exc:
        assert exc.path == str(path)
        return
    for error in result.errors:
        assert isinstance(error, InputError) and error.path == str(path)
        assert error.line is not None or error.record is not None, str(error)


@pytest.mark.parametrize("fmt", sorted(FILES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_files_raise_only_located_input_errors(fmt: str, data: st.DataObject, tmp_path: Path) -> None:
    source = FILES[fmt]
    text = data.draw(damaged(source.read_text(encoding="utf-8")))
    path = tmp_path / source.name
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    _check(path, fmt if data.draw(st.booleans()) else None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blob=st.binary(max_size=400), fmt=st.sampled_from([None, *PARSERS]))
def test_arbitrary_bytes_raise_only_input_errors(blob: bytes, fmt: str | None, tmp_path: Path) -> None:
    path = tmp_path / "blob.dat"
    path.write_bytes(blob)
    _check(path, fmt)
