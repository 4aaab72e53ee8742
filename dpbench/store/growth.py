"""Growing a stored experiment in place when its suite only adds to it.

A research sweep is rarely right the first time: one more seed, grid value, mechanism or problem
should not recompute what is already there. Cells are keyed by identity, never by position
(:mod:`dpbench.core.seeding`), so a cell of the old definition means exactly the same in a
larger one. :func:`diff` compares the stored definition of an experiment with the suite's and
says whether the new one only *adds* (seeds, grid values, algorithm or problem labels, each with
unchanged meaning) or *changes* something, naming the field; :func:`grow` rebuilds the group for
the new definition beside the store, copies every stored cell to its new position (values, error
text and status, bit for bit), then swaps the new group in with two renames.

Crash safety: the new group is written under ``<store>.grow/`` and made complete before the
swap; :func:`recover` (run under the writer lock before any growth) puts back an old group that
a crash between the two renames left aside, and removes the staging directory. A crash at any
point therefore leaves either the old experiment or the grown one, never a mixture; an
interruption settles zarr's writes in flight, then recovers the same way. Readers take no lock
and read through :meth:`.cube.Store.cube`, which sees one version of the group whole or says the
store changed under it. See docs/architecture.md, "Growing a store".
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.core.sync import sync as _zarr_sync

from ..core.schema import VARIABLE_NAMES
from ..core.seeding import canonical
from .paths import STAGING_SUFFIX
from .writable import deferred_signals

#: Suffix, inside the staging directory, of the experiment group set aside by the swap.
_OLD = ".old"


@dataclass
class Diff:
    """How a suite's definition of an experiment relates to the stored one.

    ``changes`` name what alters existing cells (refused); ``additions`` what only adds cells
    (grown in place). Both empty: the same definition."""

    changes: list[str] = field(default_factory=list)
    additions: list[str] = field(default_factory=list)

    @property
    def grows(self) -> bool:
        return not self.changes and bool(self.additions)


def _key(value: Any) -> bytes:
    """Equal for values that mean the same cell coordinate (1 and 1.0; see seeding.canonical)."""
    return canonical(value)


def _by_label(entries: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {str(e["label"]): e for e in entries}


def _diff_specs(kind: str, old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]],
                out: Diff) -> None:
    before, after = _by_label(old), _by_label(new)
    for label, spec in before.items():
        if label not in after:
            out.changes.append(f"{kind} {label!r} was removed (removing a {kind} is not "
                               "supported in place)")
            continue
        for fld in ("name", "version", "params"):
            if _key(spec.get(fld)) != _key(after[label].get(fld)):
                out.changes.append(f"{kind} {label!r}: {fld} changed from "
                                   f"{spec.get(fld)!r} to {after[label].get(fld)!r}")
    added = [label for label in after if label not in before]
    if added:
        out.additions.append(f"{kind}(s) {', '.join(map(repr, added))} added")


def diff(stored: Mapping[str, Any], new: Mapping[str, Any]) -> Diff:
    """Compare a stored experiment definition with a suite's (both
    :meth:`dpbench.config.suite.Experiment.definition` dictionaries)."""
    out = Diff()
    for fld in ("schema", "root_seed"):
        if _key(stored.get(fld)) != _key(new.get(fld)):
            out.changes.append(f"{fld} changed from {stored.get(fld)!r} to {new.get(fld)!r}")
    old_seeds, new_seeds = int(stored.get("seeds", 0)), int(new["seeds"])
    if new_seeds < old_seeds:
        out.changes.append(f"seeds decreased from {old_seeds} to {new_seeds} (removing seeds "
                           "is not supported in place)")
    elif new_seeds > old_seeds:
        out.additions.append(f"seeds {old_seeds} -> {new_seeds}")
    _diff_specs("problem", stored.get("problems", []), new["problems"], out)
    _diff_specs("algorithm", stored.get("algorithms", []), new["algorithms"], out)
    old_grid, new_grid = dict(stored.get("grid", {})), dict(new["grid"])
    if set(old_grid) != set(new_grid):
        gone, came = sorted(set(old_grid) - set(new_grid)), sorted(set(new_grid) - set(old_grid))
        out.changes.append("grid axes changed" + (f"; removed {gone}" if gone else "")
                           + (f"; added {came}" if came else "")
                           + " (every cell's meaning changes)")
        return out
    for axis, values in old_grid.items():
        after = {_key(v) for v in new_grid[axis]}
        lost = [v for v in values if _key(v) not in after]
        if lost:
            out.changes.append(f"grid axis {axis!r} lost value(s) {lost} (removing grid values "
                               "is not supported in place)")
        before = {_key(v) for v in values}
        added = [v for v in new_grid[axis] if _key(v) not in before]
        if added:
            out.additions.append(f"grid axis {axis!r} gained {added}")
    return out


def staging_dir(store: Path) -> Path:
    return store.with_name(store.name + STAGING_SUFFIX)


def settle_writes(timeout: float = 10.0) -> None:
    """Wait for zarr writes still in flight on zarr's event loop: when one write of a concurrent
    batch fails or is interrupted, the others go on and may create files after the failure."""
    async def _wait_others() -> None:
        current = asyncio.current_task()
        others = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
        if others:
            await asyncio.wait(others, timeout=timeout)
    _zarr_sync(_wait_others())


def recover(store: Path) -> None:
    """Undo what an interrupted :func:`grow` left: an old group moved aside whose replacement
    never arrived goes back, and the staging directory is removed. Call with the writer lock."""
    staging = staging_dir(store)
    if not staging.exists():
        return
    for entry in staging.iterdir():
        if entry.name.endswith(_OLD):
            home = store / entry.name[: -len(_OLD)]
            if not home.exists():
                os.rename(entry, home)
    shutil.rmtree(staging)


def _positions(old: Sequence[Any], new: Sequence[Any], dim: str) -> np.ndarray:
    where = {_key(v): i for i, v in enumerate(new)}
    try:
        return np.asarray([where[_key(v)] for v in old], dtype=np.int64)
    except KeyError as exc:  # diff() refuses this before any growth
        raise AssertionError(f"stored {dim} value missing from the grown experiment") from exc


def _coord(group: zarr.Group, dim: str) -> list[Any]:
    return [v.item() if hasattr(v, "item") else v for v in np.asarray(group[dim][...])]


def grow(store: Path, root: zarr.Group, name: str, layout: Callable[[zarr.Group], None],
         initialise: Callable[[zarr.Group], None]) -> None:
    """Replace experiment ``name`` of the store by a grown copy.

    ``layout(group)`` writes the grown experiment's empty arrays and attributes into a new
    group; ``initialise(group)`` marks it complete, once every stored cell has been copied to
    the position of its coordinates in the new arrays (new cells stay pending).
    """
    staging = staging_dir(store)
    staging.mkdir(exist_ok=True)
    target = staging / name
    if target.exists():
        shutil.rmtree(target)
    try:
        new = zarr.open_group(str(target), mode="w", zarr_format=3)
        layout(new)
        old = root[name]
        old_dims = list(old["status"].metadata.dimension_names or [])
        new_dims = list(new["status"].metadata.dimension_names or [])
        index = np.ix_(*(_positions(_coord(old, d), _coord(new, d), d) for d in new_dims))
        order = [old_dims.index(d) for d in new_dims]
        for var in VARIABLE_NAMES:
            src, dst = old[var], new[var]
            values = np.transpose(np.asarray(src[...]), order)
            block = np.full(dst.shape, dst.fill_value,
                            dtype=object if dst.dtype.kind in "OTU" else dst.dtype)
            block[index] = values
            dst[...] = block
        initialise(new)
        with deferred_signals():  # the swap: both renames, or neither
            os.rename(store / name, staging / (name + _OLD))
            os.rename(target, store / name)
    except BaseException:
        # An error or an interruption (Ctrl-C, SIGTERM): let the writes still in flight on
        # zarr's event loop finish before the staging directory is removed (else they recreate
        # files in it while it is deleted), and let no second signal cut the recovery short.
        with deferred_signals():
            settle_writes()
            recover(store)
        raise
    shutil.rmtree(staging)
