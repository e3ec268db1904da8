"""CSL-JSON (Zotero's native export) and Semantic Scholar Graph API records, as JSON."""

from __future__ import annotations

from typing import Any

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


def csl_to_record(item: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {"title": item.get("title")}
    if item.get("abstract"):
        record["abstract"] = item["abstract"]
    authors = item.get("author") or item.get("editor") or []
    if isinstance(authors, list):
        record["authors"] = [
            a.get("literal")
            or " ".join(str(a[k]) for k in ("given", "non-dropping-particle", "family") if a.get(k))
            for a in authors
            if isinstance(a, dict)
        ]
    parts = _date_parts(item.get("issued"))
    if parts:
        record["year"] = parts[0]
        if len(parts) == 3:
            record["date"] = f"{parts[0]:04d}-{parts[1]:02d}-{parts[2]:02d}"
    if item.get("container-title"):
        record["venue"] = item["container-title"]
    doi = str(item.get("DOI") or "")
    if doi.startswith("10."):
        record["doi"] = doi
    elif doi:
        record["short_doi"] = doi
    if item.get("URL"):
        record["url"] = item["URL"]
    number = str(item.get("number") or "")
    if number.lower().startswith("arxiv:") or "arxiv.org/abs/" in str(item.get("URL", "")):
        record["arxiv_id"] = number if number.lower().startswith("arxiv:") else item["URL"]
    if item.get("id") is not None:
        record["citekey"] = str(item.get("citation-key") or item["id"])
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
