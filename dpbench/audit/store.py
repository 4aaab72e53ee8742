"""The audit part of a dpbench store: one zarr group ``audit/<audit name>`` per audit.

Readable with ``xarray.open_zarr(STORE, group="audit/NAME", consolidated=False)`` (or
:func:`open_audit`). Dimensions: the point dims ``algorithm, problem, n, p, epsilon, delta,
canary``, then ``batch`` (cells of a point), ``side`` (``D``, ``D'``) and ``run`` (runs of a
batch). Variables:

* per run: ``scores`` (float64; point dims × batch × side × run) — the score of every release;
* per batch (cell): ``batch_status`` (uint8, the codes of :mod:`dpbench.engine.cells`: 0 pending,
  1 done, 2 failed, 3 not applicable), ``batch_error`` (text), ``batch_epsilon_claimed``,
  ``batch_delta_claimed``, ``batch_mu_claimed`` (NaN: no GDP claim), ``batch_certified``,
  ``batch_seconds`` (the batch's wall time on its worker; NaN unless done; like ``wall_time_s``
  of the cube, the one variable that differs between identical runs), ``batch_profile_delta``
  (point dims × batch × ``profile_epsilon``: the claimed privacy profile δ(ε) on
  :data:`~dpbench.privacy.profile.PROFILE_EPSILONS`);
* per point (recomputed from the completed batches at the end of every ``dpbench audit``):
  :data:`POINT_FLOAT_VARS` (``seconds``: the sum of the completed batches' ``batch_seconds``), ``runs_completed`` / ``runs_planned`` (runs per side),
  ``violation`` (bool), ``event`` and ``note`` (text: the confirming event, or why a point is
  not applicable).

Crash safety follows :mod:`dpbench.store.cube`: the client is the only writer, zarr writes every chunk
atomically, and a batch's scores and claims are written before its ``batch_status`` (the commit
marker), so ``done`` implies the scores are there. A crash leaves pending batches that a resume
recomputes identically.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import zarr

if TYPE_CHECKING:
    import xarray as xr

from ..config.audit import AUDIT_SCHEMA, AuditSpec
from ..core.errors import StoreError
from ..core.schema import DONE, FAILED, NOT_APPLICABLE, PENDING, STATUS_NAMES
from ..privacy.profile import PROFILE_EPSILONS
from ..store.cube import STATUS_CHUNK_CELLS, VALUE_CHUNK_CELLS, Store, chunk_shape, package_versions
from ..store.paths import AUDIT_GROUP

AUDIT_KEY = "dpbench_audit"
SIDES = ("D", "D'")
#: Per-batch float variables (the claims the ledger made for the batch's releases).
BATCH_FLOAT_VARS = ("batch_epsilon_claimed", "batch_delta_claimed", "batch_mu_claimed",
                    "batch_seconds")
#: Per-point float variables (NaN where not computable).
POINT_FLOAT_VARS = ("epsilon_lower_bound", "epsilon_claimed", "delta_claimed", "mu_lower_bound",
                    "mu_claimed", "epsilon_lower_bound_gdp", "audit_gap", "alpha", "threshold",
                    "seconds")
#: The variables that differ between two runs of the same audit (wall times): every other one
#: is bit-identical whatever the backend, the number of workers or the resumes.
NONDETERMINISTIC_AUDIT_VARS = ("batch_seconds", "seconds")
POINT_INT_VARS = ("runs_completed", "runs_planned", "n_select", "n_confirm")
POINT_TEXT_VARS = ("event", "note")


@dataclass
class BatchResult:
    """The outcome of one audit cell (a batch of ``batch`` runs on D and on D′)."""

    audit: str
    index: tuple[int, ...]          # position along the point dims
    batch: int
    status: int
    error: str
    scores: np.ndarray              # (2, batch): side D, side D′ (NaN unless done)
    epsilon_claimed: float = float("nan")
    delta_claimed: float = float("nan")
    mu_claimed: float = float("nan")
    certified: bool = False
    seconds: float = float("nan")
    profile_delta: np.ndarray | None = None   # (len(PROFILE_EPSILONS),) NaN unless done


def group_path(name: str) -> str:
    return f"{AUDIT_GROUP}/{name}"


def audit_names(store: Store) -> list[str]:
    """Names of the initialised audits of a store (sorted)."""
    if AUDIT_GROUP not in store.root:
        return []
    return sorted(name for name, g in store.root[AUDIT_GROUP].groups()
                  if g.attrs.get(AUDIT_KEY, {}).get("initialised", False))


def open_audit(store_path: Any, name: str) -> xr.Dataset:
    """The audit group ``name`` of a store as an xarray Dataset (lazy)."""
    import xarray as xr  # not at module level: ``dpbench status`` needs no xarray (issue 17)

    return xr.open_zarr(str(store_path), group=group_path(name), consolidated=False)


def _create_coord(g: zarr.Group, name: str, values: Sequence[Any]) -> None:
    arr = np.asarray(values)
    if arr.dtype.kind in "USO":
        arr = np.asarray([str(v) for v in values], dtype=object)
    a = g.create_array(name, shape=arr.shape, dtype=str if arr.dtype == object else arr.dtype,
                       dimension_names=[name])
    a[:] = arr


class AuditStore:
    """The audit groups of an open :class:`~dpbench.store.cube.Store` (the client is the only writer)."""

    def __init__(self, store: Store):
        self.store = store
        self._arrays: dict[tuple[str, str], zarr.Array] = {}

    # --- preparing ----------------------------------------------------------------------------
    def changed(self, audits: Sequence[AuditSpec], root_seed: int) -> list[str]:
        """Names of the stored audits whose definition differs from ``audits``."""
        return [a.name for a in audits if self._initialised(a.name)
                and self._meta(a.name)["fingerprint"] != a.fingerprint(root_seed)]

    def check_matches(self, audits: Sequence[AuditSpec], root_seed: int) -> None:
        """StoreError when a stored audit has a different definition (nothing is written)."""
        changed = self.changed(audits, root_seed)
        older = sorted({self._meta(name)["definition"].get("schema") for name in changed}
                       - {AUDIT_SCHEMA}, key=str)
        if older:
            raise StoreError(
                f"store {str(self.store.path)!r} holds audit(s) {', '.join(changed)} written with "
                f"audit schema {', '.join(str(v) for v in older)}; this dpbench writes audit "
                f"schema {AUDIT_SCHEMA} (docs/audit.md, 'Store layout'). Use a new --store path, "
                "or --restart to recompute those audits")
        if changed:
            raise StoreError(
                f"store {str(self.store.path)!r} holds audit(s) {', '.join(changed)} with a "
                "different definition (algorithms, problems, parameters, grid, canaries, runs, "
                "batch or root_seed changed, or a plugin's version did); their scores would not "
                "match the suite. Use a new --store path, or --restart to discard those audits")

    def prepare(self, audits: Sequence[AuditSpec], root_seed: int, restart: bool = False) -> None:
        """Create missing audit groups; refuse (or, with ``restart``, recreate) changed ones.

        In a store created by this process, a failure (e.g. a full disk) removes the store
        (:meth:`dpbench.store.cube.Store.creating`)."""
        if not restart:
            self.check_matches(audits, root_seed)
        changed = self.changed(audits, root_seed)
        with self.store.creating():
            for a in audits:
                if a.name in changed or not self._initialised(a.name):
                    self._create(a, root_seed)

    def _meta(self, name: str) -> dict[str, Any]:
        return dict(self.store.root[group_path(name)].attrs.get(AUDIT_KEY, {}))

    def _initialised(self, name: str) -> bool:
        return name in audit_names(self.store)

    def _create(self, a: AuditSpec, root_seed: int) -> None:
        root = self.store.root
        parent = root[AUDIT_GROUP] if AUDIT_GROUP in root else root.create_group(AUDIT_GROUP)
        if a.name in parent:  # changed, or a creation that crashed half-way
            del parent[a.name]
        self._arrays = {k: v for k, v in self._arrays.items() if k[0] != a.name}
        g = parent.create_group(a.name)
        coords: dict[str, Sequence[Any]] = {
            "algorithm": [s.label for s in a.algorithms], "problem": [s.label for s in a.problems],
            **a.grid, "canary": list(a.canaries), "batch": list(range(a.n_batches)),
            "side": list(SIDES), "run": list(range(a.batch)),
            "profile_epsilon": PROFILE_EPSILONS.tolist()}
        for name, values in coords.items():
            _create_coord(g, name, values)
        pdims = list(a.point_dims)
        pshape = a.point_shape
        bshape = (*pshape, a.n_batches)
        g.create_array("scores", shape=(*bshape, 2, a.batch), chunks=(*(1,) * len(bshape), 2,
                                                                      a.batch),
                       dtype="f8", fill_value=np.nan, dimension_names=[*pdims, "batch", "side",
                                                                       "run"])
        bchunks = chunk_shape(bshape, VALUE_CHUNK_CELLS)
        for var in BATCH_FLOAT_VARS:
            g.create_array(var, shape=bshape, chunks=bchunks, dtype="f8", fill_value=np.nan,
                           dimension_names=[*pdims, "batch"])
        g.create_array("batch_profile_delta", shape=(*bshape, PROFILE_EPSILONS.size),
                       chunks=(*(1,) * len(bshape), PROFILE_EPSILONS.size), dtype="f8",
                       fill_value=np.nan, dimension_names=[*pdims, "batch", "profile_epsilon"])
        g.create_array("batch_certified", shape=bshape, chunks=bchunks, dtype="bool",
                       fill_value=False, dimension_names=[*pdims, "batch"])
        g.create_array("batch_error", shape=bshape, chunks=bchunks, dtype=str, fill_value="",
                       dimension_names=[*pdims, "batch"])
        g.create_array("batch_status", shape=bshape,
                       chunks=chunk_shape(bshape, STATUS_CHUNK_CELLS), dtype="u1",
                       fill_value=PENDING, dimension_names=[*pdims, "batch"])
        for var in POINT_FLOAT_VARS:
            g.create_array(var, shape=pshape, dtype="f8", fill_value=np.nan,
                           dimension_names=pdims)
        for var in POINT_INT_VARS:
            g.create_array(var, shape=pshape, dtype="i8", fill_value=0, dimension_names=pdims)
        g.create_array("violation", shape=pshape, dtype="bool", fill_value=False,
                       dimension_names=pdims)
        for var in POINT_TEXT_VARS:
            g.create_array(var, shape=pshape, dtype=str, fill_value="", dimension_names=pdims)
        g.attrs.update({
            "audit": a.name, "description": a.description, "expect": a.expect,
            "runs": a.runs, "batch": a.batch, "root_seed": root_seed,
            "status_codes": {str(k): v for k, v in STATUS_NAMES.items()},
            "algorithms": {s.label: {"algorithm": s.name, "params": s.params,
                                     "version": s.cls.version, "citation": s.cls.citation}
                           for s in a.algorithms},
            "problems": {s.label: {"problem": s.name, "params": s.params,
                                   "version": s.cls.version} for s in a.problems},
            "packages": package_versions()})
        g.attrs[AUDIT_KEY] = {"fingerprint": a.fingerprint(root_seed),
                              "definition": a.definition(root_seed), "initialised": True}

    # --- reading ------------------------------------------------------------------------------
    def array(self, audit: str, var: str) -> zarr.Array:
        key = (audit, var)
        if key not in self._arrays:
            self._arrays[key] = self.store.root[group_path(audit)][var]
        return self._arrays[key]

    def batch_status(self, audit: str) -> np.ndarray:
        return np.asarray(self.array(audit, "batch_status")[...])

    def completed(self, audit: str, index: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """(batch indices done, their scores (k, 2, batch)) of one point."""
        done = np.flatnonzero(np.asarray(self.array(audit, "batch_status")[index]) == DONE)
        if done.size == 0:
            shape = self.array(audit, "scores").shape[-2:]
            return done, np.empty((0, *shape))
        scores = np.asarray(self.array(audit, "scores").oindex[(*index, done.tolist())])
        return done, scores.reshape(done.size, *scores.shape[-2:])

    # --- writing ------------------------------------------------------------------------------
    def _set(self, audit: str, var: str, index: tuple[int, ...], batches: list[int],
             values: np.ndarray) -> None:
        self.array(audit, var).oindex[(*index, batches)] = values

    def write_batches(self, results: Sequence[BatchResult]) -> None:
        """Write batch results: scores, claims and errors first, then ``batch_status``."""
        groups: dict[tuple[str, tuple[int, ...]], list[BatchResult]] = {}
        for r in results:
            groups.setdefault((r.audit, r.index), []).append(r)
        for (audit, index), rows in groups.items():
            batches = [r.batch for r in rows]
            self._set(audit, "scores", index, batches, np.stack([r.scores for r in rows]))
            for var, attr in zip(BATCH_FLOAT_VARS, ("epsilon_claimed", "delta_claimed",
                                                    "mu_claimed", "seconds")):
                self._set(audit, var, index, batches,
                          np.asarray([getattr(r, attr) for r in rows], dtype=np.float64))
            self._set(audit, "batch_profile_delta", index, batches, np.stack([
                np.full(PROFILE_EPSILONS.size, np.nan) if r.profile_delta is None
                else np.asarray(r.profile_delta, dtype=np.float64) for r in rows]))
            self._set(audit, "batch_certified", index, batches,
                      np.asarray([r.certified for r in rows], dtype=bool))
            self._set(audit, "batch_error", index, batches,
                      np.asarray([r.error for r in rows], dtype=object))
        for (audit, index), rows in groups.items():
            self._set(audit, "batch_status", index, [r.batch for r in rows],
                      np.asarray([r.status for r in rows], dtype=np.uint8))

    def write_points(self, audit: str, values: dict[str, np.ndarray]) -> None:
        """Write whole per-point variables (recomputed from the completed batches)."""
        for var, arr in values.items():
            target = self.array(audit, var)
            target[...] = arr.astype(object) if target.dtype.kind in "OTU" else arr

    def set_attrs(self, audit: str, attrs: dict[str, Any]) -> None:
        self.store.root[group_path(audit)].attrs.update(attrs)


def batch_counts(status: np.ndarray) -> dict[str, int]:
    """Batches per status name."""
    return {"total": int(status.size), "done": int(np.sum(status == DONE)),
            "failed": int(np.sum(status == FAILED)),
            "not_applicable": int(np.sum(status == NOT_APPLICABLE)),
            "pending": int(np.sum(status == PENDING))}
