"""numba compilation with an on-disk cache that is safe when several processes share it, and
per-kernel specialisation of compiled loops.

Why not plain ``njit(cache=True)``. numba (0.68) keeps, per function, an index file (key →
data file name) and numbered data files. ``IndexDataCacheFile.save`` loads the index, picks the
first free number, saves the index and then the data file, each by an atomic rename, but without
a lock between the steps. Two processes saving *different* keys of one function at once (two
signatures, or two CPUs sharing a cache directory over NFS: the key holds the CPU name and
features) both pick number 1: the index ends up with one key, the data file with the other
process's code, and every later process loads code compiled for another key (numba issue #10128
describes the same race for gufuncs). :func:`cached_njit` and :func:`specialise` use
:class:`SafeFunctionCache` instead, which

* names each data file by a hash of its key and of the source stamp, so different keys never
  share a data file and a data file never holds code of another source version;
* writes the data file before the index entry that points to it, so an index entry is never
  visible before its data (a reader that loses a race finds no entry, or a complete file, and at
  worst compiles again);
* treats an unreadable index or data file as a miss.

Concurrent writers of one index can still drop each other's *entries* (the last rename wins):
the cost is a recompilation in a later process, never a wrong load. When the source changes, the
first save under the new stamp deletes the data files the stale index lists, so that edits do not
pile up files.

The cache is invalidated when the function's own source file changes (numba's stamp: a hash of
the file) and, with ``depends``, when any of the listed files changes. numba does not track
functions called from other files; :func:`specialise` adds the files of every numba function the
compiled function reaches through global names.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import pickle
import types
from collections.abc import Callable, Iterable
from typing import Any

from numba import njit
from numba.core.caching import FunctionCache, IndexDataCacheFile

__all__ = ["SafeFunctionCache", "cached_njit", "inlinable", "specialise"]


def _file_stamp(path: str) -> str:
    """sha256 of a file's bytes (numba's own stamp of a function's source file is the same)."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class _SafeIndexDataCacheFile(IndexDataCacheFile):
    """numba's index/data files with data names derived from the key (see the module docstring)."""

    def save(self, key: Any, data: Any) -> None:
        digest = hashlib.sha256(pickle.dumps((key, self._source_stamp), protocol=4)).hexdigest()
        data_name = self._data_name_pattern.replace("{number:d}", digest[:20])
        self._save_data(data_name, data)  # first the data, then the entry pointing to it
        overloads = self._load_index()
        if overloads.get(key) != data_name:
            if not overloads:
                self._remove_stale_data()
            overloads[key] = data_name
            self._save_index(overloads)

    def _remove_stale_data(self) -> None:
        """Delete the data files of an index written for another source stamp (an older version
        of the source at the same path: its data names hold its stamp, so no current entry can
        point to them; a process still running the old source recompiles)."""
        try:
            with open(self._index_path, "rb") as f:
                version = pickle.load(f)
                stamp, overloads = pickle.loads(f.read())
        except Exception:
            return
        if version != self._version or stamp == self._source_stamp:
            return
        prefix = self._data_name_pattern.split("{")[0]
        for name in set(overloads.values()):
            if isinstance(name, str) and name.startswith(prefix) and os.sep not in name:
                try:
                    os.unlink(self._data_path(name))
                except OSError:
                    pass

    def load(self, key: Any) -> Any:
        try:
            return super().load(key)
        except Exception:  # a truncated or foreign file: recompile (and overwrite it)
            return None

    def _load_index(self) -> dict:
        try:
            return super()._load_index()
        except Exception:
            return {}


class SafeFunctionCache(FunctionCache):
    """numba's ``FunctionCache`` with :class:`_SafeIndexDataCacheFile`; ``depends`` are further
    source files whose content is part of the cache's stamp."""

    def __init__(self, py_func: Callable, depends: Iterable[str] = ()) -> None:
        super().__init__(py_func)
        stamp = self._impl.locator.get_source_stamp()
        extra = tuple(sorted({_file_stamp(path) for path in depends}))
        self._cache_file = _SafeIndexDataCacheFile(
            cache_path=self._cache_path, filename_base=self._impl.filename_base,
            source_stamp=(stamp, extra) if extra else stamp)


def _enable_safe_cache(dispatcher: Any, depends: Iterable[str]) -> Any:
    try:
        dispatcher._cache = SafeFunctionCache(dispatcher.py_func, depends)
    except RuntimeError:  # no writable cache location: compile in every process instead
        pass
    return dispatcher


def cached_njit(fn: Callable | None = None, *, depends: Iterable[str] = (),
                **options: Any) -> Any:
    """``numba.njit(**options)`` with an on-disk cache safe under concurrent processes
    (:class:`SafeFunctionCache`); usable as ``@cached_njit`` or ``@cached_njit(...)``."""

    def wrap(f: Callable) -> Any:
        return _enable_safe_cache(njit(cache=False, **options)(f), tuple(depends))

    return wrap if fn is None else wrap(fn)


def _source_file(fn: Any) -> str | None:
    """The source file of a module-level numba function (or Python function), else ``None``
    (a closure, a local function, a function without a file: not cacheable by name)."""
    py_func = getattr(fn, "py_func", fn)
    if not isinstance(py_func, types.FunctionType) or py_func.__closure__ is not None:
        return None
    if "<locals>" in py_func.__qualname__ or "<lambda>" in py_func.__qualname__:
        return None
    try:
        path = inspect.getfile(py_func)
    except TypeError:
        return None
    return path if os.path.isfile(path) else None


def _called_files(fn: Any, seen: set[int] | None = None) -> set[str] | None:
    """The source files of ``fn`` and of every numba function it reaches through its global
    names, recursively; ``None`` when one of them has no usable file (see :func:`_source_file`)."""
    seen = set() if seen is None else seen
    if id(fn) in seen:
        return set()
    seen.add(id(fn))
    path = _source_file(fn)
    if path is None:
        return None
    py_func = getattr(fn, "py_func", fn)
    files = {path}
    codes = [py_func.__code__]
    while codes:
        code = codes.pop()
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        for name in code.co_names:
            value = py_func.__globals__.get(name)
            if hasattr(value, "py_func"):  # a numba dispatcher
                more = _called_files(value, seen)
                if more is None:
                    return None
                files |= more
    return files


def _tag(bindings: dict[str, Any]) -> str:
    """A short file-name-safe tag of the bound functions: their names and a hash of what
    distinguishes them (module, qualified name, bytecode, numba options such as ``inline`` or
    ``fastmath``), so that two different bindings never share cache files."""
    full, short = [], []
    for key, fn in sorted(bindings.items()):
        py_func = getattr(fn, "py_func", fn)
        name = getattr(py_func, "__name__", type(fn).__name__)
        code = getattr(py_func, "__code__", None)
        options = sorted((k, repr(v)) for k, v in getattr(fn, "targetoptions", {}).items())
        full.append(repr((key, getattr(py_func, "__module__", ""),
                          getattr(py_func, "__qualname__", name),
                          hashlib.sha256(code.co_code).hexdigest() if code else "", options)))
        short.append("".join(ch if ch.isalnum() else "_" for ch in name)[:32])
    digest = hashlib.sha256("\n".join(full).encode()).hexdigest()[:12]
    return "__".join(short) + "_" + digest


def specialise(template: Callable, bindings: dict[str, Any], *, cache: bool = True,
               **options: Any) -> Any:
    """Compile ``template`` (a plain Python function) with some of its global names bound to
    the given numba functions: a copy of it whose globals are the template module's plus
    ``bindings``, compiled by ``numba.njit(**options)``.

    Calling a function received as an argument costs a call per use and, as numba keys such an
    argument by the dispatcher object, defeats the on-disk cache; a bound global is called
    directly (or inlined, when bound to an ``inline="always"`` dispatcher) and keeps the cache.
    The copy's qualified name is the template's plus the bound functions' names (so each binding
    has its own cache files), and it is cached (:class:`SafeFunctionCache`, invalidated when the
    source file of the template, of a bound function or of any numba function they reach through
    global names changes) when all of these are module-level functions with a source file (and
    ``cache``); otherwise it compiles once per process.
    The module's globals are copied when the copy is made: rebinding a module attribute later
    does not reach it.
    """
    scope = {**template.__globals__, **bindings}
    fn = types.FunctionType(template.__code__, scope, template.__name__, template.__defaults__,
                            template.__closure__)
    fn.__qualname__ = f"{template.__qualname__}__{_tag(bindings)}"
    fn.__doc__ = template.__doc__
    dispatcher = njit(cache=False, **options)(fn)
    files = _called_files(fn)
    if cache and files is not None:
        _enable_safe_cache(dispatcher, sorted(files))
    return dispatcher


def inlinable(grad: Any) -> Any:
    """A kernel function ``grad`` (a gradient, or a loss) as a global to bind into a loop
    template (:func:`dpbench.numerics.jit.specialise`): an ``inline="always"`` copy when it is
    compiled with numba's default options, else ``grad`` itself (called). Inlined at numba-IR
    level, the function is compiled with the loop's options, so only a kernel with the default
    ones (no fastmath, ...) may be inlined without changing its arithmetic."""
    options = dict(getattr(grad, "targetoptions", {"fastmath": None}))
    options.pop("nopython", None)
    plain = hasattr(grad, "py_func") and options in ({}, {"boundscheck": None})
    return njit(inline="always")(grad.py_func) if plain else grad
