"""The real-world corpus: every file imported and every export compiled by its consumers.

    python bench/corpus.py [--no-compile] [DIR ...]

For each bibliographic file of `../shared/fixtures/corpus/` and `realworld/` (or the folders
given): the works an independent parser finds (bibtexparser, rispy, the JSON items), the papers
we import, the records skipped, and the errors biber + biblatex, BibTeX (plain) and pandoc
--citeproc report on our exports that the source file does not cause itself. The harness is
tests/corpus_check.py, which tests/test_corpus.py holds to the targets (no file lost, at least
99.5% of the entries imported, 0 export errors).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import ROOT, report

sys.path.insert(0, str(ROOT / "tests"))

from corpus_check import check, corpus_files  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="folders of .bib/.ris/.json files")
    parser.add_argument("--no-compile", action="store_true", help="count only; do not run the consumers")
    args = parser.parse_args()
    files = (
        sorted(p for d in args.folders for p in d.iterdir() if p.suffix in (".bib", ".ris", ".json"))
        if args.folders
        else corpus_files()
    )
    if not files:
        sys.exit("no corpus files found (../shared/fixtures/corpus/ is absent)")
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        checks = list(pool.map(lambda p: check(p, Path(tmp) / p.stem, not args.no_compile), files))
    rows = []
    for c in checks:
        rows.append(
            [
                c.name,
                c.independent,
                c.imported,
                len(c.skipped),
                f"{100 * c.share:.1f}%",
                "LOST" if c.lost else "",
                *(len(c.errors.get(k, [])) if c.errors else "-" for k in ("biber", "bibtex", "pandoc")),
            ]
        )
    independent = sum(c.independent for c in checks)
    imported = sum(min(c.imported, c.independent) for c in checks)
    rows.append(
        [
            "all",
            independent,
            imported,
            sum(len(c.skipped) for c in checks),
            f"{100 * imported / independent:.2f}%",
            sum(1 for c in checks if c.lost),
            *(sum(len(c.errors.get(k, [])) for c in checks) for k in ("biber", "bibtex", "pandoc")),
        ]
    )
    report(
        "corpus",
        "Real-world corpus: imported entries and export errors by consumer",
        ["file", "independent", "imported", "skipped", "share", "lost", "biber", "bibtex", "pandoc"],
        rows,
        {
            "skipped": {c.name: c.skipped for c in checks if c.skipped},
            "errors": {c.name: c.errors for c in checks if c.export_errors},
        },
    )


if __name__ == "__main__":
    main()
