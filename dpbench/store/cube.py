"""The result cube: a zarr v3 store with one group per experiment, readable with
``xarray.open_zarr(PATH, group=EXPERIMENT)``.

Layout of an experiment group: coordinate arrays ``algorithm``, ``problem``, the grid axes
(``n``, ``p``, ``epsilon``, ``delta``, extras) and ``seed``; data variables
:data:`~dpbench.core.schema.VARIABLES` (the float variables NaN until written, ``status`` uint8,
``error`` string; :mod:`dpbench.core.schema` owns them and the status codes). A zarr chunk holds all seeds of
several neighbouring (algorithm, problem, grid point) rows (see :func:`chunk_shape`: up to
:data:`VALUE_CHUNK_CELLS` cells for values and errors, :data:`STATUS_CHUNK_CELLS` for ``status``),
so that a task writes a few files per variable instead of one per grid point and the resume scan
reads a handful of files. (Stores made before this layout, one grid point per chunk, are read
and written the same way.) Only the client writes, so no two writers ever touch a chunk.

Writing is batched per task: :meth:`Store.write_many` writes every touched chunk of the values
and errors once, concurrently (reading it first when the task does not fill it), then likewise
the ``status`` chunks.

Crash safety: zarr ≥ 3.1.3 writes each chunk to a temporary file and renames it, so a chunk is
either old or new. For every chunk the values and the error text are written before ``status``;
``status == done`` therefore implies the values are there, and a crash at any moment leaves a
store whose pending cells are recomputed on resume (identically, since cells are deterministic).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import os
import platform
import shutil
import socket
from collections.abc import Awaitable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.core.sync import sync as _zarr_sync

from .._version import __version__
from ..core.errors import StoreError
from ..core.schema import (
    CUBE_SCHEMA_VERSION,
    FAILED,
    FLOAT_VARS,
    MAX_LABEL_CHARS,
    NOT_APPLICABLE,
    PENDING,
    STATUS_NAMES,
    ChunkResult,
    NotApplicableChunk,
    check_version,
)
from . import growth
from .bounded_zstd import install as _install_bounded_zstd
from .integrity import check_store, reading
from .layout import STATUS_CHUNK_CELLS, VALUE_CHUNK_CELLS, chunk_shape
from .paths import (
    EXP_KEY,
    ROOT_KEY,
    SUMMARY_KEY,
    check_store_files,
    check_store_path,
    is_store,
    status_files,
)
from .record import ExperimentRecord, SuiteRecord
from .summary import Counts
from .writable import disk_reason, is_disk_error

_install_bounded_zstd()
_PACKAGES = ("numpy", "scipy", "dask", "distributed", "xarray", "zarr", "dp-accounting", "pyyaml")


def package_versions() -> dict[str, str]:
    out = {"dpbench": __version__, "python": platform.python_version()}
    for pkg in _PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def machine_info() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "platform": platform.platform(),
            "machine": platform.machine(), "processor": platform.processor(),
            "cpu_count": os.cpu_count()}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _coord_values(values: list[Any]) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind in "USO":
        return np.asarray([str(v) for v in values], dtype=object)
    return arr


@dataclass(frozen=True)
class _Row:
    """New values for some seeds of one (algorithm, problem, grid point) row of a variable."""

    experiment: str
    var: str
    index: tuple[int, ...]
    seeds: Sequence[int]
    values: np.ndarray


def _gather(aws: Sequence[Awaitable[Any]]) -> list[Any]:
    """Run zarr coroutines concurrently on zarr's event loop and return their results in order."""
    async def _all() -> list[Any]:
        return list(await asyncio.gather(*aws))
    return _zarr_sync(_all()) if aws else []


def _remove_new_store(path: Path, keep_dir: bool) -> None:
    """Remove what a failed creation wrote at ``path`` (its contents only when ``keep_dir``: the
    empty directory was there before), once no zarr write is in flight."""
    growth.settle_writes()
    if not keep_dir:
        shutil.rmtree(path, ignore_errors=True)
        return
    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


@contextlib.contextmanager
def _new_store_guard(path: Path, keep_dir: bool) -> Iterator[None]:
    """Undo the creation of a new store that fails: a full, read-only or forbidden disk (or any
    other error) while it is created leaves no half-initialised store; a disk error becomes a
    :class:`StoreError` (exit 2) naming ``--store``."""
    try:
        yield
    except Exception as exc:
        _remove_new_store(path, keep_dir)
        if isinstance(exc, OSError) and is_disk_error(exc):
            raise StoreError(f"--store: cannot create the store {str(path)!r} "
                             f"({disk_reason(exc)}); what was created is removed: free some "
                             "space, or choose another --store") from exc
        raise


class Store:
    """An open dpbench store (the client is its only writer)."""

    def __init__(self, path: Path, root: zarr.Group):
        self.path = path
        self.root = root
        self._arrays: dict[str, dict[str, zarr.Array]] = {}
        #: Whether :meth:`prepare` created this store in this process (then ``_keep_dir``: the
        #: empty directory it was created in existed before).
        self.created = False
        self._keep_dir = False
        #: Experiments :meth:`prepare` grew in place, with what was added (for the run log).
        self.grown: dict[str, str] = {}
        self._index: dict[str, dict[str, tuple[list[str], list[str]]]] | None = None

    # --- opening ------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, mode: str = "r") -> Store:
        """Open an existing store (``mode`` "r" or "r+")."""
        path = Path(path)
        if not path.exists():
            raise StoreError(f"no store at {str(path)!r}")
        if not is_store(path):
            raise StoreError(f"{str(path)!r} is not a dpbench store")
        check_store_files(path)
        check_store(path)
        with reading(path, "its root group"):
            root = zarr.open_group(str(path), mode=mode)
        store = cls(path, root)
        store._check_schema()
        return store

    @classmethod
    def prepare(cls, path: Path, suite: SuiteRecord, restart: bool = False,
                whole_suite: bool = True) -> Store:
        """Create the store, or open it for resumption after checking it matches the suite
        (its record, :func:`dpbench.config.records.suite_record`).

        An experiment whose definition only grew (more seeds, grid values, algorithms or
        problems, each existing one unchanged) is grown in place (:mod:`.growth`); one whose
        definition changed otherwise is refused, naming what changed (``restart=True``
        discards the whole store and starts over). Experiments new to the suite are added; a
        stored experiment the suite no longer lists is refused unless ``whole_suite`` is False
        (``dpbench audit`` prepares the store with its audits only). A new store whose creation
        fails (e.g. a full disk) is removed again (:meth:`creating`). Call with the store's
        writer lock held (:mod:`.lock`).
        """
        path = Path(path)
        exists = check_store_path(path)
        if exists and restart:
            shutil.rmtree(path)
            exists = False
        if exists:
            check_store_files(path)
            growth.recover(path)
            check_store(path)
            with reading(path, "its root group"):
                root = zarr.open_group(str(path), mode="r+")
            store = cls(path, root)
            store._check_schema()
            for name in store.experiments():  # damaged data is refused before any write
                store.status(name)
            for name, d in store._check_matches(suite, whole_suite).items():
                exp = suite.experiment(name)
                growth.grow(path, root, name,
                            lambda g, exp=exp: store._layout_experiment(g, exp),
                            lambda g, exp=exp: store._mark_initialised(g, exp))
                store.grown[name] = "; ".join(d.additions)
            store._arrays.clear()
            return store._prepare_experiments(suite)
        keep_dir = path.is_dir()
        with _new_store_guard(path, keep_dir):
            path.mkdir(parents=True, exist_ok=True)
            root = zarr.open_group(str(path), mode="w", zarr_format=3)
            root.attrs[ROOT_KEY] = {"schema": CUBE_SCHEMA_VERSION, "created_utc": _now(),
                                    "dpbench_version": __version__}
            store = cls(path, root)
            store.created, store._keep_dir = True, keep_dir
            return store._prepare_experiments(suite)

    @classmethod
    def unchanged_done_cells(cls, path: Path, fingerprints: dict[str, str]) -> int | None:
        """The done cells of the store at ``path`` if it holds exactly the experiments of
        ``fingerprints`` (name → fingerprint of its definition) unchanged (what ``--restart``
        would discard for nothing), else None."""
        if not check_store_path(Path(path)):
            return None
        store = cls.open(path)
        if set(store.experiments()) != set(fingerprints):
            return None
        if not all(store.holds(name, fp) for name, fp in fingerprints.items()):
            return None
        return sum(store.counts(name).done for name in fingerprints)

    def holds(self, name: str, fingerprint: str) -> bool:
        """Whether the store holds experiment ``name`` initialised under the definition whose
        fingerprint is ``fingerprint``."""
        return self._initialised(name) and \
            self.root[name].attrs[EXP_KEY]["fingerprint"] == fingerprint

    def creating(self) -> contextlib.AbstractContextManager[None]:
        """A context for writing the initial layout of the store (groups, arrays, attributes;
        e.g. the audit groups): when :meth:`prepare` created the store in this process, a
        failure inside removes it and a disk error becomes a :class:`StoreError` (exit 2); for
        an existing store it does nothing (a full disk propagates as an ``OSError`` and the
        cells already written are kept)."""
        if not self.created:
            return contextlib.nullcontext()
        return _new_store_guard(self.path, self._keep_dir)

    def _prepare_experiments(self, suite: SuiteRecord) -> Store:
        """Record the suite in the root attributes and create or refresh its experiments."""
        store, root = self, self.root
        store._index = None
        meta = dict(root.attrs[ROOT_KEY])
        meta.update({**suite.meta, SUMMARY_KEY: None})
        root.attrs[ROOT_KEY] = meta
        for exp in suite.experiments:
            if not store._initialised(exp.name):
                store._create_experiment(exp)
            g = store.root[exp.name]
            g.attrs["expectations"], g.attrs["algorithms"] = (
                exp.expectations, exp.refreshed_algorithms(g.attrs.get("algorithms", {})))
        return store

    def _initialised(self, name: str) -> bool:
        if name not in self.root:
            return False
        return bool(self.root[name].attrs.get(EXP_KEY, {}).get("initialised", False))

    def _check_schema(self) -> None:
        """Refuse a store written under another cube schema, before anything is computed."""
        meta = self.root.attrs.get(ROOT_KEY, {})
        written_by = meta.get("dpbench_version")
        check_version(meta.get("schema"), f"store {str(self.path)!r}", written_by)
        for name, group in self.root.groups():
            info = group.attrs.get(EXP_KEY, {})
            if not info.get("initialised", False):
                continue
            check_version(info.get("schema"), f"experiment {name!r} of store {str(self.path)!r}",
                          written_by)

    def _check_matches(self, suite: SuiteRecord, whole_suite: bool) -> dict[str, growth.Diff]:
        """The stored experiments the suite grows (by name, with their :class:`~.growth.Diff`);
        :class:`StoreError` naming every experiment and field the suite changes, or the stored
        experiments it no longer lists, before anything is written."""
        problems, grows = [], {}
        for exp in suite.experiments:
            if not self._initialised(exp.name) or self.holds(exp.name, exp.fingerprint):
                continue
            info = self.root[exp.name].attrs[EXP_KEY]
            d = growth.diff(info.get("definition", {}), exp.definition)
            if d.changes:
                problems.append(f"experiment {exp.name!r}: " + "; ".join(d.changes))
            elif d.grows:
                grows[exp.name] = d
            else:  # same definition, other fingerprint: a plugin's identity rules changed
                problems.append(f"experiment {exp.name!r}: its cells' identity changed")
        if whole_suite:
            listed = set(suite.names)
            gone = [name for name in self.experiments() if name not in listed]
            if gone:
                problems.append(f"experiment(s) {', '.join(map(repr, gone))} are in the store "
                                "but no longer in the suite (put them back in the suite to "
                                "keep them)")
        if problems:
            raise StoreError(
                f"store {str(self.path)!r} was created for a different definition: "
                + "; ".join(problems) + ". Only additions (seeds, grid values, algorithms, "
                "problems, experiments) resume an existing store; its results would not match "
                "the suite otherwise. Use a new --store path, or --restart to discard this "
                "store and start over")
        return grows

    def _create_experiment(self, exp: ExperimentRecord) -> None:
        if exp.name in self.root:  # a creation that crashed half-way: no results in it yet
            del self.root[exp.name]
        g = self.root.create_group(exp.name)
        self._layout_experiment(g, exp)
        self._mark_initialised(g, exp)

    @staticmethod
    def _layout_experiment(g: zarr.Group, exp: ExperimentRecord) -> None:
        """Write an experiment's coordinates, empty cube variables and attributes into ``g``."""
        dims = exp.dims
        for name, values in exp.coords.items():
            arr = _coord_values(values)
            dtype = str if arr.dtype == object else arr.dtype
            a = g.create_array(name, shape=arr.shape, dtype=dtype, dimension_names=[name])
            a[:] = arr
        shape = exp.shape
        chunks = chunk_shape(shape, VALUE_CHUNK_CELLS)
        for var in FLOAT_VARS:
            g.create_array(var, shape=shape, chunks=chunks, dtype="f8", fill_value=np.nan,
                           dimension_names=list(dims))
        g.create_array("error", shape=shape, chunks=chunks, dtype=str, fill_value="",
                       dimension_names=list(dims))
        g.create_array("status", shape=shape, chunks=chunk_shape(shape, STATUS_CHUNK_CELLS),
                       dtype="u1", fill_value=PENDING, dimension_names=list(dims))
        g.attrs.update({**exp.attrs, "packages": package_versions(), "machine": machine_info()})

    @staticmethod
    def _mark_initialised(g: zarr.Group, exp: ExperimentRecord) -> None:
        """The last write of an experiment's layout: readers and resumes trust it from here."""
        g.attrs[EXP_KEY] = {"fingerprint": exp.fingerprint,
                            "definition": exp.definition, "initialised": True,
                            "schema": CUBE_SCHEMA_VERSION}

    # --- reading ------------------------------------------------------------------------------
    def experiments(self) -> list[str]:
        return sorted(name for name, _ in self.root.groups() if self._initialised(name))

    def slice_index(self) -> dict[str, dict[str, tuple[list[str], list[str]]]]:
        """Per experiment, its algorithm and problem labels with the registered names behind
        them (what a :class:`~dpbench.config.slice.Slice` matches); read once per open
        store (:meth:`prepare` resets it)."""
        if self._index is None:
            self._index = self._read_slice_index()
        return self._index

    def _read_slice_index(self) -> dict[str, dict[str, tuple[list[str], list[str]]]]:
        out = {}
        for name in self.experiments():
            attrs = self.root[name].attrs
            index = {}
            for kind, key in (("algorithm", "algorithms"), ("problem", "problems")):
                with reading(self.path, f"the {kind} labels of experiment {name!r}"):
                    labels = [str(v) for v in self.root[name][kind][...]]
                self._check_labels(name, kind, labels)
                info = attrs.get(key, {})
                index[kind] = (labels, [str(info.get(label, {}).get(kind, label))
                                        for label in labels])
            out[name] = index
        return out

    def cube(self, name: str, variables: Sequence[str] | None = None,
             positions: dict[str, Any] | None = None) -> Any:
        """Experiment ``name``'s cube as a loaded xarray Dataset (only ``variables``, and only
        ``positions`` along its dimensions, when given), read whole from one version of the group.

        Readers take no lock, and a run that grows the experiment swaps a new group in with two
        renames (:mod:`.growth`): a read that straddles the swap could mix the old group's
        metadata with the new one's chunks. The group's version (the inode of its directory and
        the time of its metadata) is taken before and after the read; a read that straddles a
        swap, or fails while the version changes, is read again once; a second is a
        :class:`StoreError` saying the store changed under the reader (exit 2)."""
        import xarray as xr  # not at module level: ``dpbench status`` needs no xarray

        for _ in range(2):
            before = self._version(name)
            try:
                ds = xr.open_zarr(str(self.path), group=name, consolidated=False, chunks=None)
                if variables is not None:
                    ds = ds[[v for v in variables if v in ds]]
                ds = (ds.isel(positions) if positions else ds).load()
            except Exception as exc:
                if before is not None and self._version(name) == before:
                    with reading(self.path, f"experiment {name!r}"):
                        raise exc  # the store did not change: its data is damaged
                continue
            if before is not None and self._version(name) == before:
                for kind in ("algorithm", "problem"):
                    if kind in ds.coords:
                        self._check_labels(name, kind, ds[kind].values.tolist())
                return ds
        raise StoreError(f"experiment {name!r} of store {str(self.path)!r} changed while it was "
                         "read (a run grew it in place); run the command again")

    def _check_labels(self, name: str, kind: str, labels: Sequence[Any]) -> None:
        """Refuse labels no suite can give (longer than :data:`MAX_LABEL_CHARS`): shown in every
        report and table, they would make each of them as large."""
        long = [label for label in labels if len(str(label)) > MAX_LABEL_CHARS]
        if long:
            raise StoreError(f"store {str(self.path)!r} is damaged: experiment {name!r} has an "
                             f"{kind} label of {len(str(long[0]))} characters (a suite's labels "
                             f"have at most {MAX_LABEL_CHARS}). Re-run its suite into a new "
                             "--store (or with --restart)")

    def _version(self, name: str) -> tuple[int, int] | None:
        """The version of experiment ``name``'s group on disk (None mid-swap)."""
        try:
            return (os.stat(self.path / name).st_ino,
                    os.stat(self.path / name / "zarr.json").st_mtime_ns)
        except OSError:
            return None

    def status(self, experiment: str) -> np.ndarray:
        with reading(self.path, f"the status of experiment {experiment!r}"):
            st = np.asarray(self.root[experiment]["status"][...])
        if st.size and int(st.max()) > max(STATUS_NAMES):
            raise StoreError(f"store {str(self.path)!r} is damaged: the status of experiment "
                             f"{experiment!r} holds the code {int(st.max())} (allowed: "
                             f"{sorted(STATUS_NAMES)}). Re-run its suite into a new --store (or "
                             "with --restart)")
        return st

    def values(self, experiment: str, var: str) -> np.ndarray:
        """Cube variable ``var`` of ``experiment``, read whole."""
        with reading(self.path, f"{var} of experiment {experiment!r}"):
            return np.asarray(self.root[experiment][var][...])

    def counts(self, experiment: str) -> Counts:
        return Counts.of(self.status(experiment))

    def pending_mask(self, experiment: str, retry_failed: bool = True) -> np.ndarray:
        st = self.status(experiment)
        return (st == PENDING) | (st == FAILED) if retry_failed else (st == PENDING)

    def failures(self, experiment: str, limit: int = 20, where: np.ndarray | bool = True,
                 ) -> list[tuple[dict[str, Any], str]]:
        """(coordinates, message) of up to ``limit`` failed cells (among those ``where`` is
        true: a slice's mask)."""
        g = self.root[experiment]
        st = self.status(experiment)
        idx = np.argwhere((st == FAILED) & where)[:limit]
        dims = list(g["status"].metadata.dimension_names or [])
        out = []
        with reading(self.path, f"the errors of experiment {experiment!r}"):
            for cell in idx:
                coords = {d: _py(g[d][int(i)]) for d, i in zip(dims, cell)}
                out.append((coords, str(g["error"][tuple(int(i) for i in cell)])))
        return out

    # --- writing ------------------------------------------------------------------------------
    def _array(self, experiment: str, var: str) -> zarr.Array:
        cache = self._arrays.setdefault(experiment, {})
        if var not in cache:
            cache[var] = self.root[experiment][var]
        return cache[var]

    def write(self, res: ChunkResult) -> None:
        """Write one chunk (see :meth:`write_many`)."""
        self.write_many([res])

    def write_many(self, results: Sequence[ChunkResult]) -> None:
        """Write the results of one or more tasks: all values and errors first, then ``status`` (the
        commit marker).

        Only the cells in each result's ``seeds`` change: stored cells of a partially computed
        row (a resume after failures) or of the neighbouring grid points that share a zarr chunk
        are kept, so a done cell is never rewritten. Results must be for distinct cells (two
        results may share a row: different tasks can hold different seeds of it).
        """
        rows: list[_Row] = []
        for res in results:
            for var in FLOAT_VARS:
                rows.append(_Row(res.experiment, var, res.index, res.seeds,
                                 np.asarray(res.values[var], dtype=np.float64)))
            rows.append(_Row(res.experiment, "error", res.index, res.seeds,
                             np.asarray(res.errors, dtype=object)))
        self._commit(rows)
        self._commit_status([_Row(r.experiment, "status", r.index, r.seeds,
                                  np.asarray(r.status, dtype=np.uint8)) for r in results])

    def mark_not_applicable(self, chunks: Iterable[NotApplicableChunk]) -> int:
        """Record not-applicable chunks (status 3 with the reason in ``error``)."""
        errors, status = [], []
        for c in chunks:
            n = self._array(c.experiment, "status").shape[-1]
            seeds = tuple(range(n))
            errors.append(_Row(c.experiment, "error", c.index, seeds,
                               np.asarray([c.reason] * n, dtype=object)))
            status.append(_Row(c.experiment, "status", c.index, seeds,
                               np.full(n, NOT_APPLICABLE, dtype=np.uint8)))
        self._commit(errors)
        self._commit_status(status)
        return sum(len(r.seeds) for r in status)

    def _commit_status(self, rows: Sequence[_Row]) -> None:
        """The commit step of a write (separate so that tests can interrupt it)."""
        self._commit(rows)

    def _commit(self, rows: Sequence[_Row]) -> None:
        """Set ``var[index][seeds] = values`` for every row, writing each touched zarr chunk
        exactly once, whole (concurrently across chunks).

        A chunk whose every row is fully given is written without reading it; otherwise it is
        read, updated and written back (safe: the client is the only writer).
        """
        groups: dict[tuple[str, str, tuple[int, ...]], list[_Row]] = {}
        for row in rows:
            cshape = self._array(row.experiment, row.var).chunks
            origin = tuple(i // c * c for i, c in zip(row.index, cshape))
            groups.setdefault((row.experiment, row.var, origin), []).append(row)
        plans = []
        for (exp, var, origin), items in groups.items():
            arr = self._array(exp, var)
            region = tuple(slice(o, min(o + c, n))
                           for o, c, n in zip((*origin, 0), arr.chunks, arr.shape))
            n_rows = int(np.prod([r.stop - r.start for r in region[:-1]]))
            covered = len(items) == n_rows and all(len(r.seeds) == arr.shape[-1] for r in items)
            plans.append((arr, origin, region, items, covered))
        with reading(self.path, "a chunk it rewrites (while writing results)"):
            stored = iter(_gather([arr._async_array.getitem(region)
                                   for arr, _, region, _, covered in plans if not covered]))
        writes = []
        for arr, origin, region, items, covered in plans:
            dtype = object if arr.dtype.kind in "OTU" else arr.dtype
            shape = tuple(r.stop - r.start for r in region)
            block = np.empty(shape, dtype=dtype) if covered else np.array(next(stored), dtype=dtype)
            for r in items:
                local = tuple(i - o for i, o in zip(r.index, origin))
                block[local][list(r.seeds)] = r.values
            writes.append(arr._async_array.setitem(region, block))
        _gather(writes)

    def record_run(self, info: dict[str, Any]) -> None:
        """Append a run's provenance (times, cluster, counts) to the root attributes, with the
        store's status summary (:data:`~.paths.SUMMARY_KEY`) as of now: the run has written
        everything. It stands for the status arrays as long as their files are unchanged
        (:func:`~.paths.status_files`); the next :meth:`prepare` clears it."""
        meta = dict(self.root.attrs[ROOT_KEY])
        runs = list(meta.get("runs", []))
        runs.append(info)
        meta["runs"] = runs[-50:]
        try:
            meta[SUMMARY_KEY] = {"rows": [list(row) for row in self.status_rows()],
                                 "status_files": status_files(self.path, self.experiments())}
        except Exception:  # noqa: BLE001 - no summary: readers count the status arrays
            meta[SUMMARY_KEY] = None
        self.root.attrs[ROOT_KEY] = meta

    def summary_rows(self) -> list[list[Any]] | None:
        """The status rows :meth:`record_run` recorded last, if no writer has begun since."""
        summary = self.root.attrs[ROOT_KEY].get(SUMMARY_KEY)
        return summary.get("rows") if isinstance(summary, dict) else None

    def status_rows(self, only: Any = None) -> list[tuple[str, str, int, int, int, int, int]]:
        """Per experiment and algorithm label, among the slice ``only``'s cells (a
        :class:`dpbench.config.slice.Slice`; all by default): (experiment, label, cells, done,
        failed, not applicable, pending)."""
        index = self.slice_index()
        if only is not None:
            only.check(index)
        rows = []
        for name in only.experiments(index) if only is not None else list(index):
            st = self.status(name)
            labels, _ = index[name]["algorithm"]
            picked = (only.mask(st.shape, index[name]) if only is not None
                      else np.ones(st.shape, dtype=bool))
            for i, label in enumerate(labels):
                if not picked[i].any():
                    continue
                c = Counts.of(st[i][picked[i]])
                rows.append((name, label, c.total, c.done, c.failed, c.not_applicable,
                             c.pending))
        return rows


def _py(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v
