"""CSL-JSON (Zotero's native export) and Semantic Scholar Graph API records, as JSON.

A CSL item is kept whole: the common variables on the paper, names in their parts, and every
other variable (page, volume, issue, ISSN, ISBN, publisher, short DOIs...) in the paper's
`biblio` record, so that a CSL-JSON export gives the item back.
"""

from __future__ import annotations

import re
from typing import Any

from assistant.ingest.records import plausible_year

_CSL_KEYS = {"issued", "container-title", "citation-key", "URL", "DOI", "title-short", "accessed"}


def is_csl(item: Any) -> bool:
    return isinstance(item, dict) and "type" in item and bool(_CSL_KEYS & set(item))


def is_s2(item: Any) -> bool:
    return isinstance(item, dict) and ("paperId" in item or "externalIds" in item)


def _date_parts(value: Any) -> list[int]:
    try:
        parts = value["date-parts"][0]
        return [int(p) for p in parts if str(p).strip().isdigit()]
    except (KeyError, IndexError, TypeError, ValueError):
        return []


_NAME_KEYS = {
    "family": "family",
    "given": "given",
    "non-dropping-particle": "particle",
    "dropping-particle": "dropping_particle",
    "suffix": "suffix",
    "literal": "literal",
}
# Read into the paper or its record's names, type and keywords; every other variable is kept.
_HANDLED = frozenset(
    "id type title abstract author editor issued container-title DOI URL keyword citation-key".split()
)


def csl_person(name: Any) -> dict[str, str] | None:
    if not isinstance(name, dict):
        return None
    person = {ours: str(name[key]) for key, ours in _NAME_KEYS.items() if name.get(key)}
    return person or None


def _people(value: Any) -> list[dict[str, str]]:
    return [p for p in (csl_person(n) for n in value) if p] if isinstance(value, list) else []


def _display(p: dict[str, str]) -> str:
    if p.get("literal"):
        return p["literal"]
    keys = ("given", "dropping_particle", "particle", "family", "suffix")
    return " ".join(p[k] for k in keys if p.get(k))


# CSL-JSON's rich-text markup (citeproc-js, Zotero, pandoc): shown as formatting, not text.
_MARKUP = re.compile(r"</?(?:i|b|sup|sub|sc)>|<span\s+(?:class=\"nocase\"|style=\"[^\"]*\")\s*>|</span>")


def plain(value: Any) -> Any:
    return _MARKUP.sub("", value) if isinstance(value, str) else value


def _crossref_lists(item: dict[str, Any]) -> dict[str, Any]:
    """Crossref's JSON (and Manubot's items taken from it) gives text variables as lists
    (`"container-title": ["Nature"]`, `"subtitle": []`): CSL-JSON has one text there, the first;
    an empty list is no value. Lists of names stay as they are."""
    out: dict[str, Any] = {}
    for key, value in item.items():
        if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
            texts = [str(v) for v in value if str(v).strip()]
            if not texts:
                continue
            value = texts[0] if key != "keyword" else ", ".join(texts)
        out[key] = value
    return out


def csl_to_record(item: dict[str, Any]) -> dict[str, Any]:
    item = _crossref_lists(item)
    record: dict[str, Any] = {"title": plain(item.get("title"))}
    biblio: dict[str, Any] = {
        "type": str(item.get("type") or "document"),
        "source_format": "csl-json",
        "source_type": str(item.get("type") or ""),
    }
    fields: dict[str, str] = {}
    source: dict[str, Any] = {}
    if item.get("abstract"):
        record["abstract"] = item["abstract"]
    authors, editors = _people(item.get("author")), _people(item.get("editor"))
    if authors:
        biblio["authors"] = authors
    if editors:
        biblio["editors"] = editors
    if authors or editors:
        record["authors"] = [_display(p) for p in authors or editors]
    parts = _date_parts(item.get("issued"))
    if parts:
        record["year"] = parts[0]  # an implausible one (`[[5]]`) leaves the paper without a year
    if parts and plausible_year(parts[0]):
        if len(parts) == 3:
            record["date"] = f"{parts[0]:04d}-{parts[1]:02d}-{parts[2]:02d}"
        elif len(parts) == 2:
            fields["issued"] = f"{parts[0]:04d}-{parts[1]:02d}"
    if item.get("container-title"):
        record["venue"] = plain(item["container-title"])
    doi = str(item.get("DOI") or "")
    if doi.startswith("10."):
        record["doi"] = doi
    elif doi:
        record["short_doi"] = doi
        fields["DOI"] = doi  # a short DOI (10/abcd): no paper identity, but the record keeps it
    if item.get("URL"):
        record["url"] = item["URL"]
    number = str(item.get("number") or "")
    if number.lower().startswith("arxiv:") or "arxiv.org/abs/" in str(item.get("URL", "")):
        record["arxiv_id"] = number if number.lower().startswith("arxiv:") else item["URL"]
    if item.get("id") is not None:
        record["citekey"] = str(item.get("citation-key") or item["id"])
    keywords = item.get("keyword")
    if isinstance(keywords, str) and keywords.strip():
        biblio["keywords"] = [k.strip() for k in re.split(r"[,;]", keywords) if k.strip()]
    for key, value in item.items():
        if key in _HANDLED:
            continue
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            fields[key] = str(value)
        elif isinstance(value, dict) and _date_parts(value):  # accessed, event-date...: ISO
            fields[key] = "-".join(f"{p:02d}" if i else f"{p:04d}" for i, p in enumerate(_date_parts(value)))
        else:  # other names (translator...), other dates (accessed...): as they came
            source[key] = value
    if item.get("citation-key"):
        source["citation-key"] = item["citation-key"]
    biblio["fields"] = fields
    biblio["source_fields"] = source
    record["biblio"] = biblio
    record["csl_type"] = item.get("type")
    return record


def s2_to_record(item: dict[str, Any]) -> dict[str, Any]:
    ext = item.get("externalIds") or {}
    record: dict[str, Any] = {
        "title": item.get("title"),
        "abstract": item.get("abstract"),
        "authors": item.get("authors") or [],
        "year": item.get("year"),
        "date": item.get("publicationDate"),
        "venue": item.get("venue") or None,
        "arxiv_id": ext.get("ArXiv"),
        "doi": ext.get("DOI"),
        "url": item.get("url"),
        "s2_paper_id": item.get("paperId"),
    }
    if item.get("fieldsOfStudy"):
        record["categories"] = item["fieldsOfStudy"]
    return {k: v for k, v in record.items() if v is not None}


def convert(items: list[Any]) -> list[Any]:
    """CSL and Semantic Scholar items mapped to our record fields; anything else as it is."""
    return [csl_to_record(i) if is_csl(i) else s2_to_record(i) if is_s2(i) else i for i in items]
