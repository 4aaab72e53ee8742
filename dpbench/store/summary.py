"""A store's state from its metadata alone, without zarr (0.15 s to import): its status counts
(``dpbench status``), and whether a run of a suite would change nothing (the resume of a
finished store). Each answer is ``None`` unless the metadata proves it; the caller then opens
the store (docs/architecture.md, "Start-up and throughput")."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import StoreError
from ..core.schema import CUBE_SCHEMA_VERSION, DONE, FAILED, NOT_APPLICABLE, PENDING
from .integrity import load_metadata
from .paths import AUDIT_GROUP, EXP_KEY, STAGING_SUFFIX, SUMMARY_KEY, root_meta, status_files
from .record import SuiteRecord


@dataclass
class Counts:
    """Cells of a store (or a part of it) by status."""

    total: int = 0
    pending: int = 0
    done: int = 0
    failed: int = 0
    not_applicable: int = 0

    @classmethod
    def of(cls, status: np.ndarray) -> Counts:
        return cls(int(status.size), int(np.sum(status == PENDING)), int(np.sum(status == DONE)),
                   int(np.sum(status == FAILED)), int(np.sum(status == NOT_APPLICABLE)))


#: The columns of a status row (:meth:`Store.status_rows <.cube.Store.status_rows>`).
STATUS_COLUMNS = ("experiment", "algorithm", "cells", "done", "failed", "n/a", "pending")


def experiment_counts(rows: Iterable[Sequence[Any]]) -> dict[str, Counts]:
    """Status rows (:data:`STATUS_COLUMNS`) summed per experiment."""
    out: dict[str, Counts] = {}
    for name, _, total, done, failed, na, pending in rows:
        c = out.setdefault(name, Counts())
        c.total, c.done, c.failed = c.total + total, c.done + done, c.failed + failed
        c.not_applicable, c.pending = c.not_applicable + na, c.pending + pending
    return out


def summarised(path: str | Path) -> tuple[list[list[Any]], dict[str, Any]] | None:
    """The status rows of the store at ``path`` from the summary its last run wrote, with the
    root metadata; ``None`` when they cannot stand for the store's arrays: no summary (a writer
    has begun since, or a run was killed), a status array's files changed since it was counted,
    another schema, audits (their batch counts are in their arrays) or failed cells (their
    messages are)."""
    path = Path(path)
    meta = root_meta(path)
    if meta is None or meta.get("schema") != CUBE_SCHEMA_VERSION or (path / AUDIT_GROUP).exists():
        return None
    summary = meta.get(SUMMARY_KEY)
    rows = summary.get("rows") if isinstance(summary, dict) else None
    if not isinstance(rows, list) or not all(
            isinstance(r, list) and len(r) == len(STATUS_COLUMNS) and isinstance(r[0], str)
            and all(isinstance(c, int) and c >= 0 for c in r[2:]) for r in rows):
        return None
    try:
        if summary.get("status_files") != status_files(path, sorted({r[0] for r in rows})):
            return None  # a status array changed since it was counted
    except StoreError:  # a name that is no experiment's: the slow path reports the store
        return None
    if any(r[4] for r in rows):
        return None
    return rows, meta


def _json(value: Any) -> Any:
    """``value`` as it reads back from JSON metadata (tuples become lists, and so on)."""
    return json.loads(json.dumps(value))


def _attributes(group: Path) -> dict[str, Any] | None:
    """A group's attributes read without zarr (bounded, regular files only); None when they
    cannot be read or its dpbench entry is not a mapping (the slow path then reports why)."""
    try:
        doc = load_metadata(group / "zarr.json", group.parent)
    except StoreError:
        return None
    attrs = doc.get("attributes")
    if not isinstance(attrs, dict) or not isinstance(attrs.get(EXP_KEY, {}), dict):
        return None
    return attrs


def finished(path: Path, suite: SuiteRecord) -> list[list[Any]] | None:
    """The status rows of the store at ``path`` if a run of ``suite`` (its record, built with the
    store's expectations as ``previous``) would change nothing in
    it: every cell is done or not applicable (none failed, none pending), the store
    holds exactly the suite's experiments under their current definitions, records the same
    suite, and its theory (expected rates, rate cards, oracle kinds) is already up to date.
    Such a resume writes nothing. ``None`` otherwise, also whenever the metadata cannot show
    it (then the run opens the store, and refreshes or logs as usual)."""
    path = Path(path)
    found = summarised(path)
    if found is None:
        return None
    rows, meta = found
    if any(r[6] for r in rows):  # pending cells (summarised has none failed)
        return None
    if path.with_name(path.name + STAGING_SUFFIX).exists():  # a growth to recover first
        return None
    if any(meta.get(k) != v for k, v in _json(suite.meta).items()):
        return None
    names = set(suite.names)
    stored = {p.name for p in path.iterdir() if p.is_dir() and (
        (_attributes(p) or {}).get(EXP_KEY) or {}).get("initialised")}
    if stored != names or {r[0] for r in rows} != names:
        return None
    for exp in suite.experiments:
        attrs = _attributes(path / exp.name) or {}
        info = attrs.get(EXP_KEY) or {}
        if info.get("schema") != CUBE_SCHEMA_VERSION or info.get("fingerprint") != exp.fingerprint:
            return None
        algorithms = exp.refreshed_algorithms(attrs.get("algorithms") or {})
        if _json(exp.expectations) != attrs.get("expectations") or \
                _json(algorithms) != attrs.get("algorithms"):
            return None
    return rows


def stored_expectations(path: Path) -> dict[str, Any]:
    """Per initialised experiment of the store at ``path``, the expected rates it holds (with
    their derived exponents, which a new record reuses when unchanged); empty when there is no
    store or its metadata cannot be read."""
    path = Path(path)
    out: dict[str, Any] = {}
    try:
        groups = sorted(p for p in path.iterdir() if p.is_dir()) if root_meta(path) else []
    except OSError:
        return out
    for group in groups:
        attrs = _attributes(group) or {}
        if (attrs.get(EXP_KEY) or {}).get("initialised") and isinstance(
                attrs.get("expectations"), list):
            out[group.name] = attrs["expectations"]
    return out
