"""The merge log: which records of other identities were merged into a paper, kept on the
paper so that one can be split off again, and the paper rebuilt without it."""

from __future__ import annotations

from typing import Any

from assistant.models import MergeEntry, MergeLog, Paper, citekeys, now_utc, variant_id

MERGES_KEPT = 20  # merged records a paper keeps for splitting; older ones fold into its base


def _read_log(meta: dict[str, Any] | None) -> MergeLog | None:
    raw = (meta or {}).get("merges")
    if not raw:
        return None
    try:
        return MergeLog.model_validate_json(raw)
    except ValueError:
        return None


def _merge_log(
    pid: str,
    stored: Paper | None,
    meta: dict[str, Any] | None,
    records: list[tuple[Paper, str | None]],
) -> MergeLog | None:
    """The paper's merge log with these records added (None if no record of another identity
    was merged into it). The base is the paper as it was before its first logged merge.

    A record of another identity has another id, or (merged by the paper's own id: the same
    DOI) a citation key other than the paper's: it is logged under an id of its own
    (`variant_id`), which it takes if it is split off. A record logged before is not logged
    again."""
    log = _read_log(meta)
    if stored is not None:
        known = set(citekeys(stored))
    else:
        known = {k for r, how in records if not how for k in citekeys(r)}
    logged = {e.record.id for e in log.entries} if log else set()
    others: list[tuple[Paper, str]] = []
    own: list[Paper] = []
    for r, how in records:
        keys = [k for k in citekeys(r) if k not in known]
        if r.id == pid and how and keys and known:  # the paper has a key already: another one
            r = r.model_copy(update={"id": variant_id(r)})
            how = f"{how}, another citation key ({', '.join(keys)})"
        if r.id == pid or not how:
            own.append(r)
        elif r.id not in logged:
            others.append((r, how))
            logged.add(r.id)
        known.update(keys)
    if not others:
        return None
    if log is None:
        if stored is not None:
            base = stored
        else:  # new in this batch: its own record(s) are the base
            own = [r for r in own if r.id == pid] or [others.pop(0)[0].model_copy(update={"id": pid})]
            base = own[0]
            for r in own[1:]:
                base = base.merged_with(r)
        log = MergeLog(base=base)
    when = now_utc()
    log.entries += [MergeEntry(how=str(how), at=when, record=r) for r, how in others]
    while len(log.entries) > MERGES_KEPT:
        oldest = log.entries.pop(0)
        log.base = log.base.merged_with(oldest.record.model_copy(update={"id": pid}))
    return log


def _unmerged(current: Paper, log: MergeLog, rest: list[MergeEntry]) -> Paper:
    """The paper without one merged record: rebuilt from its base and the other records; a
    field that changed since by other means (a re-import under the paper's own id) keeps its
    current value, and list fields keep what those added."""
    full, rebuilt = log.base, log.base
    for e in log.entries:
        full = full.merged_with(e.record.model_copy(update={"id": current.id}))
    for e in rest:
        rebuilt = rebuilt.merged_with(e.record.model_copy(update={"id": current.id}))
    values: dict[str, Any] = {}
    for name in Paper.model_fields:
        now, was, back = getattr(current, name), getattr(full, name), getattr(rebuilt, name)
        if isinstance(now, list):
            values[name] = list(dict.fromkeys([*back, *(v for v in now if v not in was)]))
        else:
            values[name] = back if now == was else now
    values["id"] = current.id
    return Paper(**values)
