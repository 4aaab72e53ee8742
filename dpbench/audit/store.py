"""The audit part of a dpbench store: one zarr group ``audit/<audit name>`` per audit.

Readable with ``xarray.open_zarr(STORE, group="audit/NAME", consolidated=False)`` (or
:func:`open_audit`): per point (dims ``algorithm, problem``, the grid axes the audit does not
search, ``canary``) the results of :func:`dpbench.audit.engine.compute_bounds` —
:data:`POINT_FLOAT_VARS` (the bounds, the claims, the resolution, the exact ε of the chosen
configuration where the mechanism can compute it, the worker seconds), :data:`POINT_INT_VARS`
(``runs_completed`` and ``runs_planned``: confirmation runs per side; ``selection_runs``,
``configurations``, ``events``), ``violation`` and :data:`POINT_TEXT_VARS` (the event that gave
the ε bound, the chosen configuration, the stage reached, a note).

Each point's batches live in its own group ``audit/<name>/points/<k>`` (k its flat index):
``pilot.c<config>.r<round>.b<part>`` and ``timing`` arrays (side × run × p: the releases of the
search's pilot batches, from which the search and the selection are recomputed), the
``confirm_counts`` array (batch × side × event: how many releases of each confirmation batch
fell in each fixed event) and its ``state`` attribute: the configurations, the plan (the budget
resolved into runs), the search's decisions, the selection (scorers and events) and every
batch's status, claims, seconds and error.

Crash safety follows :mod:`dpbench.store.cube`: the client is the only writer, zarr writes every
chunk atomically, and a batch's data are written before its status (the commit marker); a
decision is recorded before any batch that depends on it. A crash leaves batches that a resume
recomputes identically; recorded decisions are reused, never recomputed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import zarr

if TYPE_CHECKING:
    import xarray as xr

from ..config.audit import AUDIT_SCHEMA, AuditSpec
from ..core.errors import StoreError
from ..core.schema import DONE, FAILED, STATUS_NAMES
from ..privacy.profile import PROFILE_EPSILONS
from ..store.cube import Store, package_versions
from ..store.paths import AUDIT_GROUP
from .points import Config
from .procedure import Claims, ConfirmResult, PilotResult, Plan, PointState, Selection, Work

AUDIT_KEY = "dpbench_audit"
SIDES = ("D", "D'")
#: Per-point float variables (NaN where not computable).
POINT_FLOAT_VARS = ("epsilon_lower_bound", "epsilon_claimed", "delta_claimed", "mu_lower_bound",
                    "mu_claimed", "epsilon_lower_bound_gdp", "audit_gap", "alpha",
                    "resolution_epsilon", "true_epsilon", "seconds")
#: The variables that differ between two runs of the same audit (wall times, and what a time
#: budget resolves to): every other one is bit-identical whatever the backend or the number of
#: workers when the runs are pinned (``runs:``), and given the same resolved plan otherwise.
NONDETERMINISTIC_AUDIT_VARS = ("seconds",)
POINT_INT_VARS = ("runs_completed", "runs_planned", "selection_runs", "configurations", "events")
POINT_TEXT_VARS = ("event", "config", "stage", "note")


def group_path(name: str) -> str:
    return f"{AUDIT_GROUP}/{name}"


def audit_names(store: Store) -> list[str]:
    """Names of the initialised audits of a store (sorted)."""
    if AUDIT_GROUP not in store.root:
        return []
    return sorted(name for name, g in store.root[AUDIT_GROUP].groups()
                  if g.attrs.get(AUDIT_KEY, {}).get("initialised", False))


def open_audit(store: str | os.PathLike[str], name: str) -> xr.Dataset:
    """The audit group ``name`` of the store at path ``store`` as an xarray Dataset (lazy): the
    point variables."""
    import xarray as xr  # not at module level: ``dpbench status`` needs no xarray (issue 17)

    return xr.open_zarr(os.fspath(store), group=group_path(name), consolidated=False)


def _create_coord(g: zarr.Group, name: str, values: Sequence[Any]) -> None:
    arr = np.asarray(values)
    if arr.dtype.kind in "USO":
        arr = np.asarray([str(v) for v in values], dtype=object)
    a = g.create_array(name, shape=arr.shape, dtype=str if arr.dtype == object else arr.dtype,
                       dimension_names=[name])
    a[:] = arr


def _json(value: Any) -> Any:
    """``value`` as JSON metadata reads it back (a round trip; NaN must already be null)."""
    return json.loads(json.dumps(value, allow_nan=False))


class AuditStore:
    """The audit groups of an open :class:`~dpbench.store.cube.Store` (the client is the only writer)."""

    def __init__(self, store: Store):
        self.store = store

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
                "different definition (algorithms, problems, parameters, grid, canaries, search, "
                "budget, runs or root_seed changed, or a plugin's version did); their batches "
                "would not match the suite. Use a new --store path, or --restart to discard "
                "those audits")

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
        g = parent.create_group(a.name)
        coords: dict[str, Sequence[Any]] = {
            "algorithm": [s.label for s in a.algorithms], "problem": [s.label for s in a.problems],
            **{ax: a.grid[ax] for ax in a.axes}, "canary": list(a.canaries),
            "side": list(SIDES), "profile_epsilon": PROFILE_EPSILONS.tolist()}
        for name, values in coords.items():
            _create_coord(g, name, values)
        pdims = list(a.point_dims)
        pshape = a.point_shape
        for var in POINT_FLOAT_VARS:
            g.create_array(var, shape=pshape, dtype="f8", fill_value=np.nan,
                           dimension_names=pdims)
        for var in POINT_INT_VARS:
            g.create_array(var, shape=pshape, dtype="i8", fill_value=0, dimension_names=pdims)
        g.create_array("violation", shape=pshape, dtype="bool", fill_value=False,
                       dimension_names=pdims)
        for var in POINT_TEXT_VARS:
            g.create_array(var, shape=pshape, dtype=str, fill_value="", dimension_names=pdims)
        g.create_group("points")
        g.attrs.update({
            "audit": a.name, "description": a.description, "expect": a.expect,
            "budget_s": a.budget_s, "runs": a.runs, "selection_runs": a.selection_runs,
            "search": a.search, "root_seed": root_seed,
            "status_codes": {str(k): v for k, v in STATUS_NAMES.items()},
            "algorithms": {s.label: {"algorithm": s.name, "params": s.params,
                                     "version": s.cls.version, "citation": s.cls.citation}
                           for s in a.algorithms},
            "problems": {s.label: {"problem": s.name, "params": s.params,
                                   "version": s.cls.version} for s in a.problems},
            "packages": package_versions()})
        g.attrs[AUDIT_KEY] = {"fingerprint": a.fingerprint(root_seed),
                              "definition": a.definition(root_seed), "initialised": True}

    # --- the points' batches -------------------------------------------------------------------
    def _point_group(self, audit: str, flat: int) -> zarr.Group:
        parent = self.store.root[group_path(audit)]["points"]
        key = str(int(flat))
        return parent[key] if key in parent else parent.create_group(key)

    def _state_record(self, g: zarr.Group) -> dict[str, Any]:
        rec = g.attrs.get("state")
        return dict(rec) if isinstance(rec, dict) else {}

    def load_state(self, audit: str, flat: int, configs: Sequence[Config]) -> PointState:
        """A point's stored state (the batches done, the recorded decisions)."""
        g = self._point_group(audit, flat)
        rec = self._state_record(g)
        stored = [Config.from_dict(c) for c in rec.get("configs", [])]
        if stored and stored != list(configs):
            raise StoreError(f"audit {audit!r}, point {flat}: the stored configurations differ "
                             "from the suite's; the store was edited or damaged")
        state = PointState(n_configs=len(configs))
        if rec.get("plan"):
            state.plan = Plan.from_dict(rec["plan"])
        state.rounds = [(tuple(int(c) for c in kept), tuple((int(c), _num(v)) for c, v in scored))
                        for kept, scored in rec.get("rounds", [])]
        if rec.get("selection"):
            state.selection = Selection.from_dict(rec["selection"])
        counts = g["confirm_counts"] if "confirm_counts" in g else None
        for key, b in dict(rec.get("batches", {})).items():
            if b.get("status") == FAILED:
                state.failed[key] = str(b.get("error", ""))
                continue
            if b.get("status") != DONE:
                continue
            claims = Claims.from_list(b["claims"])
            if key.startswith("confirm/"):
                if counts is None:
                    continue
                i = int(key.split("/b")[1])
                c = np.asarray(counts[i], dtype=np.int64)
                state.confirms[key] = ConfirmResult(c[0], c[1], int(b["runs"]), claims,
                                                    _num(b.get("seconds")))
            else:
                arr = np.asarray(g[_array_name(key)][...], dtype=np.float64)
                res = PilotResult(arr[0], arr[1], claims, _num(b.get("seconds")),
                                  _num(b.get("score_seconds", 0.0)))
                if key == "timing":
                    state.timing = res
                else:
                    state.pilots[key] = res
        return state

    def save_decisions(self, audit: str, flat: int, configs: Sequence[Config],
                       state: PointState) -> None:
        """Record the plan, the search's decisions and the selection (before any batch that
        depends on them is written), and create the confirmation array once there is a
        selection."""
        g = self._point_group(audit, flat)
        rec = self._state_record(g)
        rec["configs"] = [c.to_dict() for c in configs]
        rec["plan"] = state.plan.to_dict() if state.plan is not None else None
        rec["rounds"] = [[list(kept), [[c, _jnum(v)] for c, v in scored]]
                         for kept, scored in state.rounds]
        rec["selection"] = state.selection.to_dict() if state.selection is not None else None
        rec.setdefault("batches", {})
        new = _json(rec)
        if new != self._state_record(g):
            g.attrs["state"] = new
        if state.selection is not None and state.plan is not None and "confirm_counts" not in g:
            g.create_array("confirm_counts",
                           shape=(state.plan.confirm_batches, 2, len(state.selection.events)),
                           chunks=(1, 2, len(state.selection.events)), dtype="i8",
                           fill_value=-1, dimension_names=["batch", "side", "event"])

    def write_batch(self, audit: str, flat: int, work: Work, result: Any, error: str = "") -> None:
        """Write one batch: its data first, then its status (``result`` None: failed)."""
        g = self._point_group(audit, flat)
        entry: dict[str, Any] = {"status": FAILED, "error": error[:2000]}
        if isinstance(result, PilotResult):
            name = _array_name(work.key)
            data = np.stack([result.theta0, result.theta1])
            if name in g:
                del g[name]
            arr = g.create_array(name, shape=data.shape, dtype="f8",
                                 dimension_names=["side", "run", "coordinate"])
            arr[...] = data
            entry = {"status": DONE, "claims": result.claims.to_list(),
                     "seconds": _jnum(result.seconds), "runs": int(data.shape[1]),
                     "score_seconds": _jnum(result.score_seconds)}
        elif isinstance(result, ConfirmResult):
            g["confirm_counts"][work.part] = np.stack([result.counts0, result.counts1])
            entry = {"status": DONE, "claims": result.claims.to_list(),
                     "seconds": _jnum(result.seconds), "runs": int(result.runs)}
        rec = self._state_record(g)
        batches = dict(rec.get("batches", {}))
        batches[work.key] = entry
        rec["batches"] = batches
        g.attrs["state"] = _json(rec)

    def write_points(self, audit: str, values: dict[str, np.ndarray]) -> None:
        """Write whole per-point variables (recomputed at the end of every run)."""
        g = self.store.root[group_path(audit)]
        for var, arr in values.items():
            target = g[var]
            target[...] = arr.astype(object) if target.dtype.kind in "OTU" else arr

    def set_attrs(self, audit: str, attrs: dict[str, Any]) -> None:
        self.store.root[group_path(audit)].attrs.update(attrs)


def audit_status(store: Store, name: str) -> dict[str, int]:
    """What ``dpbench status`` says of an audit: its points, those finished (every confirmation
    batch done), not applicable (no configuration), and its batches done and failed."""
    g = store.root[group_path(name)]
    configs = np.asarray(g["configurations"][...])
    out = {"points": int(configs.size), "not_applicable": 0, "finished": 0, "batches_done": 0,
           "batches_failed": 0}
    stages = np.asarray(g["stage"][...]).ravel()
    out["not_applicable"] = int(np.sum([str(st) == "" and c == 0 for st, c in
                                        zip(stages, configs.ravel())]))
    points = g["points"]
    for key, pg in points.groups():
        rec = dict(pg.attrs.get("state") or {})
        batches = dict(rec.get("batches") or {})
        out["batches_done"] += sum(b.get("status") == DONE for b in batches.values())
        out["batches_failed"] += sum(b.get("status") == FAILED for b in batches.values())
        plan = rec.get("plan") or {}
        confirms = [k for k, b in batches.items() if k.startswith("confirm/")
                    and b.get("status") == DONE]
        if plan and rec.get("selection") and len(confirms) == int(plan.get("confirm_batches", -1)):
            out["finished"] += 1
    return out


def _array_name(key: str) -> str:
    """The array of a pilot or timing batch (``pilot/c0/r1/b0`` → ``pilot.c0.r1.b0``)."""
    return key.replace("/", ".")


def _jnum(v: Any) -> float | None:
    from .procedure import json_number

    return json_number(float(v)) if v is not None else None


def _num(v: Any) -> float:
    from .procedure import number

    return number(v)
