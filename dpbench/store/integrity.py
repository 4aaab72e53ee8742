"""A store's structure, checked before anything in it is used (docs/reliability.md, "Damaged
stores").

A store is data from outside: a disk, a crash of another program, a hand edit or an adversary may
have changed any file in it. Before a command reads one, :func:`check_store` reads every metadata
document of the store (regular files only, at most :data:`~.paths.MAX_METADATA_BYTES` each,
nested at most :data:`MAX_DEPTH` deep) and checks it against the cube's schema: the documents'
keys and types, every array's shape, data type, chunk grid (the layout :mod:`.layout` writes),
chunk key encoding, codecs and dimension names, each experiment's coordinates against its
variables, and the attributes the commands read, by type. Anything else is a
:class:`~dpbench.core.errors.StoreError` (exit 2) naming the file and the field. Chunk contents
are checked as they are read (:func:`reading`): a chunk that does not decode is an error naming
the experiment and the variable, never a traceback.

The store layer knows no plugin and no audit internals: an audit group's arrays are checked as
zarr arrays (shape, chunks, types, codecs), its attributes by type.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import DpbenchError, StoreError
from ..core.files import read_regular
from ..core.schema import CUBE_SCHEMA_VERSION, FLOAT_VARS, VARIABLE_NAMES
from .layout import allowed_chunk_shapes
from .paths import AUDIT_GROUP, EXP_KEY, MAX_METADATA_BYTES, ROOT_KEY

__all__ = ["MAX_CELLS", "MAX_DEPTH", "check_store", "load_metadata", "reading"]

#: Deepest nesting of a metadata document (a store's is about 8 deep).
MAX_DEPTH = 64
#: Most cells of one stored array (the status array of an experiment is read whole: a byte each).
MAX_CELLS = 5 * 10**8
#: Most chunks along a coordinate (coordinates are read whole).
MAX_COORD_CHUNKS = 1024
_GROUP_KEYS = {"zarr_format", "node_type", "attributes", "consolidated_metadata"}
_ARRAY_KEYS = {"zarr_format", "node_type", "attributes", "shape", "data_type", "chunk_grid",
               "chunk_key_encoding", "fill_value", "codecs", "dimension_names",
               "storage_transformers"}
#: The codecs dpbench's stores use (zstd decoded with a bound: :mod:`.bounded_zstd`); gzip and
#: blosc, which state no decompressed size, are refused.
_CODECS = {"bytes", "vlen-utf8", "vlen-bytes", "zstd", "crc32c"}
_NUMERIC = {f"{k}{b}" for k in ("int", "uint") for b in (8, 16, 32, 64)} | {"float32", "float64"}
_COORD_TYPES = _NUMERIC | {"string", "bool"}
_VAR_TYPES = {**{v: {"float64"} for v in FLOAT_VARS}, "error": {"string"}, "status": {"uint8"}}


# --- typed attributes ----------------------------------------------------------------------------
class _Spec:
    """What an attribute must be; :meth:`problem` says what it is instead (None: it fits)."""

    def problem(self, value: Any) -> tuple[str, str] | None:  # (where below, what is wrong)
        raise NotImplementedError


@dataclass(frozen=True)
class Of(_Spec):
    """One of the JSON scalar kinds ``kinds`` ("str", "int", "number", "bool", "null",
    "mapping", "list": any content)."""

    kinds: tuple[str, ...]

    def problem(self, value: Any) -> tuple[str, str] | None:
        return None if any(_is(value, k) for k in self.kinds) else (
            "", f"{' or '.join(self.kinds)} expected, found {_kind(value)}")


@dataclass(frozen=True)
class ListOf(_Spec):
    item: _Spec
    length: int | None = None

    def problem(self, value: Any) -> tuple[str, str] | None:
        if not isinstance(value, list):
            return "", f"a list expected, found {_kind(value)}"
        if self.length is not None and len(value) != self.length:
            return "", f"a list of {self.length} expected, found {len(value)} item(s)"
        for i, item in enumerate(value):
            found = self.item.problem(item)
            if found:
                return f"[{i}]{found[0]}", found[1]
        return None


@dataclass(frozen=True)
class MapOf(_Spec):
    """A mapping from strings to values of ``value``."""

    value: _Spec

    def problem(self, value: Any) -> tuple[str, str] | None:
        if not isinstance(value, dict):
            return "", f"a mapping expected, found {_kind(value)}"
        for key, item in value.items():
            found = self.value.problem(item)
            if found:
                return f".{key}{found[0]}", found[1]
        return None


@dataclass(frozen=True)
class Fields(_Spec):
    """A mapping whose keys in ``fields`` have their kinds (others are allowed: later versions
    may add some); ``required`` must be present."""

    fields: Mapping[str, _Spec]
    required: tuple[str, ...] = ()

    def problem(self, value: Any) -> tuple[str, str] | None:
        if not isinstance(value, dict):
            return "", f"a mapping expected, found {_kind(value)}"
        for key in self.required:
            if key not in value:
                return f".{key}", "missing"
        for key, spec in self.fields.items():
            if key in value:
                found = spec.problem(value[key])
                if found:
                    return f".{key}{found[0]}", found[1]
        return None


def _is(value: Any, kind: str) -> bool:
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return {"str": isinstance(value, str), "bool": isinstance(value, bool),
            "int": isinstance(value, int) and not isinstance(value, bool),
            "null": value is None, "mapping": isinstance(value, dict),
            "list": isinstance(value, list)}[kind]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    name = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a mapping"}.get(type(value), type(value).__name__)
    return f"{name} ({_short(value)})" if isinstance(value, (int, float, str)) else name


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


STR, INT, NUM, BOOL = Of(("str",)), Of(("int",)), Of(("number",)), Of(("bool",))
MAPPING = Of(("mapping",))
OPT_STR, OPT_NUM = Of(("str", "null")), Of(("number", "null"))
_TIMING = Fields({"seconds": NUM, "units": NUM, "cells": INT, "first_seconds": NUM,
                  "first_units": NUM, "first_tasks": INT})
_RUN = Fields({"started_utc": STR, "seconds": NUM, "backend": STR, "cells_computed": INT,
               "cells_failed": INT, "timings": MapOf(_TIMING)})
#: The root's dpbench entry.
ROOT_SPEC = Fields({
    "schema": INT, "created_utc": STR, "dpbench_version": STR, "suite_name": STR,
    "suite_source": STR, "suite_yaml": STR, "suite_hash": STR, "root_seed": INT,
    "runs": ListOf(_RUN)}, required=("schema",))
# The status summary (paths.SUMMARY_KEY) is not typed here: it is a cache that
# summary.summarised checks where it is used, counting the status arrays instead of a malformed one.
_RATE_CARD = Fields({"expression": STR, "exponents": MapOf(NUM), "citation": STR, "regime": STR,
                     "cap": OPT_STR, "quantity": OPT_STR, "scale": OPT_STR, "notes": OPT_STR,
                     "defaults": MapOf(NUM)}, required=("expression", "exponents"))
_ALGORITHM = Fields({"algorithm": STR, "params": MAPPING, "version": STR, "privacy": STR,
                     "citation": STR, "requires": ListOf(STR),
                     "rate_card": Of(("null", "mapping")), "oracle_kinds": MapOf(OPT_STR)})
_PROBLEM = Fields({"problem": STR, "params": MAPPING, "version": STR, "citation": STR,
                   "constants": MapOf(OPT_NUM), "has_population": BOOL})
_EXPECTATION = Fields({"id": STR, "algorithm": STR, "problem": STR, "axis": STR, "slope": NUM,
                       "tolerance": Of(("number", "str")), "at": MAPPING, "source": STR,
                       "variable": STR, "tolerance_reason": STR, "level_tolerance": NUM,
                       "level_reason": STR, "derived": MapOf(NUM), "derivation": MAPPING},
                      required=("id", "algorithm", "problem", "axis", "slope"))
_ENTRY = Fields({"fingerprint": STR, "definition": MAPPING, "initialised": BOOL, "schema": INT})
#: An experiment group's attributes.
EXPERIMENT_SPEC = Fields({
    EXP_KEY: _ENTRY, "experiment": STR, "description": STR, "suite": STR, "root_seed": INT,
    "seeds": INT, "normalisation": STR, "status_codes": MapOf(STR),
    "nondeterministic_variables": ListOf(STR), "algorithms": MapOf(_ALGORITHM),
    "problems": MapOf(_PROBLEM), "extra_axes": MAPPING, "packages": MapOf(STR),
    "machine": MAPPING, "expectations": ListOf(_EXPECTATION)})
#: An audit group's attributes (dpbench.audit.store writes them).
AUDIT_SPEC = Fields({
    "dpbench_audit": _ENTRY, "audit": STR, "description": STR, "expect": STR, "budget_s": NUM,
    "runs": Of(("int", "null")), "selection_runs": Of(("int", "null")), "root_seed": INT,
    "status_codes": MapOf(STR), "algorithms": MapOf(MAPPING), "problems": MapOf(MAPPING),
    "packages": MapOf(STR), "alpha_total": NUM, "alpha_per_point": NUM, "audit_points": INT,
    "state": MAPPING})


def check_attributes(value: Any, spec: _Spec, where: str) -> None:
    """:class:`StoreError` naming ``where`` and the field unless ``value`` fits ``spec``."""
    found = spec.problem(value)
    if found:
        field = found[0][1:] if where.endswith(": ") and found[0].startswith(".") else found[0]
        raise StoreError(f"{where}{field}: {found[1]}")


# --- metadata documents --------------------------------------------------------------------------
def load_metadata(path: Path, store: Path) -> dict[str, Any]:
    """The JSON document ``path`` of ``store``: a regular file of at most
    :data:`~.paths.MAX_METADATA_BYTES`, an object nested at most :data:`MAX_DEPTH` deep."""
    rel = _rel(path, store)
    try:
        text = read_regular(path, MAX_METADATA_BYTES, "store metadata")
        doc = json.loads(text)
    except FileNotFoundError:
        raise _damaged(store, f"{rel!r} is missing") from None
    except RecursionError:
        raise _damaged(store, f"{rel!r} is nested too deeply") from None
    except (OSError, ValueError) as exc:
        raise _damaged(store, f"{rel!r} is not a JSON document ({_cut(exc)})") from None
    if not isinstance(doc, dict):
        raise _damaged(store, f"{rel!r}: a JSON object expected, found {_kind(doc)}")
    if _depth(doc) > MAX_DEPTH:
        raise _damaged(store, f"{rel!r} is nested more than {MAX_DEPTH} deep")
    return doc


def _depth(doc: Any) -> int:
    deepest, stack = 0, [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return deepest
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return deepest


def _damaged(store: Path, what: str) -> StoreError:
    return StoreError(f"store {str(store)!r} is damaged: {what}. Re-run its suite into a new "
                      "--store (or with --restart)")


def _rel(path: Path, store: Path) -> str:
    return os.path.relpath(path, store)


def _cut(exc: BaseException, limit: int = 200) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else text[:limit] + "..."


def _node(store: Path, folder: Path, kind: str) -> dict[str, Any]:
    """The metadata of the group or array in ``folder``, its top-level keys checked."""
    doc = load_metadata(folder / "zarr.json", store)
    rel = _rel(folder / "zarr.json", store)
    if doc.get("zarr_format") != 3 or doc.get("node_type") != kind:
        raise _damaged(store, f"{rel!r}: a zarr v3 {kind} expected (zarr_format "
                              f"{_short(doc.get('zarr_format'))}, node_type "
                              f"{_short(doc.get('node_type'))})")
    unknown = sorted(set(doc) - (_GROUP_KEYS if kind == "group" else _ARRAY_KEYS))
    if unknown:
        raise _damaged(store, f"{rel!r}: unknown key(s) {', '.join(map(repr, unknown))}")
    if not isinstance(doc.get("attributes", {}), dict):
        raise _damaged(store, f"{rel!r}: attributes: a mapping expected, found "
                              f"{_kind(doc.get('attributes'))}")
    if kind == "group" and doc.get("consolidated_metadata") is not None:
        raise _damaged(store, f"{rel!r}: consolidated metadata (dpbench writes none)")
    return doc


@dataclass(frozen=True)
class _Array:
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: str
    dims: tuple[str, ...]


def _array(store: Path, folder: Path) -> _Array:
    """An array's metadata, checked as zarr v3 as dpbench writes it."""
    doc = _node(store, folder, "array")
    where = f"store {str(store)!r} is damaged: {_rel(folder / 'zarr.json', store)!r}: "
    check_attributes(doc, Fields({
        "shape": ListOf(INT), "data_type": STR,
        "chunk_grid": Fields({"name": STR, "configuration": Fields(
            {"chunk_shape": ListOf(INT)}, required=("chunk_shape",))},
            required=("name", "configuration")),
        "chunk_key_encoding": Fields({"name": STR, "configuration": MAPPING},
                                     required=("name",)),
        "codecs": ListOf(Fields({"name": STR, "configuration": MAPPING}, required=("name",))),
        "dimension_names": ListOf(STR), "storage_transformers": ListOf(MAPPING)},
        required=("shape", "data_type", "chunk_grid", "chunk_key_encoding", "codecs",
                  "dimension_names", "fill_value")), where)
    shape, chunks = tuple(doc["shape"]), tuple(doc["chunk_grid"]["configuration"]["chunk_shape"])
    dims, dtype = tuple(doc["dimension_names"]), doc["data_type"]

    def bad(what: str) -> StoreError:
        return StoreError(where + what + ". Re-run its suite into a new --store (or with "
                          "--restart)")

    if doc["chunk_grid"]["name"] != "regular":
        raise bad(f"chunk grid {_short(doc['chunk_grid']['name'])} (dpbench writes 'regular')")
    encoding = doc["chunk_key_encoding"]
    if encoding["name"] not in ("default", "v2") or \
            encoding.get("configuration", {}).get("separator", "/") not in ("/", "."):
        raise bad(f"chunk key encoding {_short(encoding)} (allowed: 'default' or 'v2' with "
                  "separator '/' or '.')")
    if any(s < 0 for s in shape) or math.prod(shape) > MAX_CELLS:
        raise bad(f"shape {_short(list(shape))} (non-negative lengths, at most {MAX_CELLS} "
                  "cells)")
    if len(chunks) != len(shape) or len(dims) != len(shape):
        raise bad(f"shape {list(shape)}, chunk shape {_short(list(chunks))} and dimension "
                  f"names {_short(list(dims))} differ in rank")
    if any(not 1 <= c <= max(s, 1) for c, s in zip(chunks, shape)):
        raise bad(f"chunk shape {_short(list(chunks))} for shape {list(shape)} (each chunk "
                  "length between 1 and the axis length)")
    if len(set(dims)) != len(dims):
        raise bad(f"dimension names {_short(list(dims))} repeat")
    if dtype not in _COORD_TYPES:
        raise bad(f"data type {_short(dtype)} (allowed: {', '.join(sorted(_COORD_TYPES))})")
    names = [c["name"] for c in doc["codecs"]]
    unknown = [n for n in names if n not in _CODECS]
    if unknown or not names or sum(n in ("bytes", "vlen-utf8", "vlen-bytes") for n in names) != 1:
        raise bad(f"codecs {_short(names)} (allowed: one of bytes, vlen-utf8, vlen-bytes, with "
                  f"{', '.join(sorted(_CODECS - {'bytes', 'vlen-utf8', 'vlen-bytes'}))})")
    if doc.get("storage_transformers"):
        raise bad("storage transformers (dpbench writes none)")
    if not _fill_fits(doc["fill_value"], dtype):
        raise bad(f"fill value {_short(doc['fill_value'])} for data type {dtype}")
    return _Array(shape, chunks, dtype, dims)


def _fill_fits(fill: Any, dtype: str) -> bool:
    if dtype == "string":
        return isinstance(fill, str)
    if dtype == "bool":
        return isinstance(fill, bool)
    if dtype.startswith(("int", "uint")):
        return _is(fill, "int")
    return _is(fill, "number") or fill in ("NaN", "Infinity", "-Infinity") or (
        isinstance(fill, str) and fill.startswith("0x"))


# --- the store ------------------------------------------------------------------------------------
def check_store(store: Path) -> None:
    """Check every metadata document of ``store`` (see the module docstring); nothing is
    written."""
    root = _node(store, store, "group")
    entry = root.get("attributes", {}).get(ROOT_KEY)
    check_attributes(entry, ROOT_SPEC, f"store {str(store)!r} is damaged: zarr.json: {ROOT_KEY}")
    if entry["schema"] != CUBE_SCHEMA_VERSION:
        return  # another schema: Store refuses it, saying which (core.schema.check_version)
    for child in _folders(store, store):
        if child.name == AUDIT_GROUP:
            _node(store, child, "group")
            for audit in _folders(store, child):
                _check_audit(store, audit)
        else:
            _check_whole(store, child)


def _version(folder: Path) -> tuple[int, int] | None:
    """The version of a group on disk (its directory's inode, its metadata's time; None while
    a growth swaps it: store/growth.py)."""
    try:
        return os.stat(folder).st_ino, os.stat(folder / "zarr.json").st_mtime_ns
    except OSError:
        return None


def _check_whole(store: Path, folder: Path) -> None:
    """:func:`_check_experiment` on one version of the group: a run that grows the experiment
    swaps a new group in while a reader may be checking it (store/growth.py), so a check that
    straddles a swap is made again once, and a second is a :class:`StoreError` saying the store
    changed under the reader (as :meth:`.cube.Store.cube` does for the data)."""
    for _ in range(2):
        before = _version(folder)
        try:
            _check_experiment(store, folder)
        except StoreError:
            if before is not None and _version(folder) == before:
                raise  # the group did not change: it is damaged
            continue
        if before is not None and _version(folder) == before:
            return
    if not folder.exists():
        return  # taken out for good between the two renames' reader checks: not listed
    raise StoreError(f"experiment {folder.name!r} of store {str(store)!r} changed while it was "
                     "read (a run grew it in place); run the command again")


def _folders(store: Path, folder: Path) -> list[Path]:
    """The sub-folders of ``folder`` (its other entries: zarr.json, chunks)."""
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()
                  and p.name != "c")


def _check_experiment(store: Path, folder: Path) -> None:
    group = _node(store, folder, "group")
    attrs = group.get("attributes", {})
    where = f"store {str(store)!r} is damaged: {_rel(folder / 'zarr.json', store)!r}: attributes"
    check_attributes(attrs, EXPERIMENT_SPEC, where)
    entry = attrs.get(EXP_KEY, {})
    if not entry.get("initialised", False) or entry.get("schema") != CUBE_SCHEMA_VERSION:
        return  # a creation that crashed half-way (skipped by readers, recreated by a run), or
        # another schema (refused by Store, saying which)
    arrays = {p.name: _array(store, p) for p in _folders(store, folder)}
    name = folder.name
    missing = [v for v in VARIABLE_NAMES if v not in arrays]
    if missing:
        raise _damaged(store, f"experiment {name!r} lacks the cube variable(s) "
                              f"{', '.join(missing)} of schema version {CUBE_SCHEMA_VERSION}")
    dims = arrays["status"].dims
    missing = [d for d in dims if d not in arrays]
    if missing:
        raise _damaged(store, f"experiment {name!r} lacks the coordinate(s) {', '.join(missing)}")
    if len(dims) < 3 or dims[:2] != ("algorithm", "problem") or dims[-1] != "seed":
        raise _damaged(store, f"experiment {name!r}: status has dimensions {_short(list(dims))} "
                              "(algorithm, problem, the grid axes, seed expected)")
    for d in dims:
        coord = arrays[d]
        if coord.dims != (d,):
            raise _damaged(store, f"experiment {name!r}: coordinate {d!r} has dimensions "
                                  f"{_short(list(coord.dims))}")
        if math.ceil(coord.shape[0] / coord.chunks[0]) > MAX_COORD_CHUNKS:
            raise _damaged(store, f"experiment {name!r}: coordinate {d!r} is cut into more than "
                                  f"{MAX_COORD_CHUNKS} chunks")
    shape = tuple(arrays[d].shape[0] for d in dims)
    for var in VARIABLE_NAMES:
        arr = arrays[var]
        if arr.dims != dims or arr.shape != shape:
            raise _damaged(store, f"experiment {name!r}: {var} has dimensions "
                                  f"{_short(list(arr.dims))} and shape {list(arr.shape)}; its "
                                  f"coordinates give {list(dims)} and {list(shape)}")
        if arr.dtype not in _VAR_TYPES.get(var, _COORD_TYPES):
            raise _damaged(store, f"experiment {name!r}: {var} is stored as {arr.dtype} "
                                  f"({' or '.join(sorted(_VAR_TYPES[var]))} expected)")
        if arr.chunks not in allowed_chunk_shapes(var, shape):
            raise _damaged(store, f"experiment {name!r}: {var} is cut into chunks of "
                                  f"{list(arr.chunks)}, not as dpbench writes it")
    stray = sorted(set(arrays) - set(VARIABLE_NAMES) - set(dims))
    if stray:
        raise _damaged(store, f"experiment {name!r} holds array(s) outside the cube schema: "
                              f"{', '.join(map(repr, stray))}")


def _check_audit(store: Path, folder: Path) -> None:
    group = _node(store, folder, "group")
    where = f"store {str(store)!r} is damaged: {_rel(folder / 'zarr.json', store)!r}: attributes"
    check_attributes(group.get("attributes", {}), AUDIT_SPEC, where)
    for child in _folders(store, folder):
        if child.name == "points":
            _node(store, child, "group")
            for point in _folders(store, child):
                doc = _node(store, point, "group")
                check_attributes(doc.get("attributes", {}), Fields({"state": MAPPING}),
                                 f"store {str(store)!r} is damaged: "
                                 f"{_rel(point / 'zarr.json', store)!r}: attributes")
                for arr in _folders(store, point):
                    _array(store, arr)
        else:
            _array(store, child)


@contextlib.contextmanager
def reading(store: Path, what: str) -> Iterator[None]:
    """Turn an error while reading ``what`` of a checked store (a chunk that does not decode, a
    codec's refusal) into a :class:`StoreError` naming it: the metadata was checked, so what
    fails now is the data."""
    try:
        yield
    except (DpbenchError, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 - any error here is damage
        raise _damaged(store, f"{what} cannot be read ({_cut(exc)})") from None
