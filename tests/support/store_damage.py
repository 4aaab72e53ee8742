"""Damaged and hostile stores (issue 33): the kinds of damage a store can suffer — by a disk, a
crash outside dpbench, a hand edit or an adversary — and a driver that puts each one through every
command that reads a store.

Each damage is applied to a copy of one small finished store (:func:`make_pristine`: one
experiment with an expectation, a failed cell, an audit group). For each command the driver
records the exit code, whether a traceback was printed, the seconds taken and the peak resident
memory (sampled every 10 ms), and whether the store and the working directory are unchanged.
``python -m tests.support.store_damage CATEGORY PRISTINE WORKDIR`` prints one JSON line per
(damage, command); tests/integration/test_store_damage.py runs one process per category.

The table in docs/reliability.md, "Damaged stores", lists these damages by category (a test keeps
the two equal).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import resource
import shutil
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

SUITE = textwrap.dedent("""\
    name: damaged
    root_seed: 3
    seeds: 2
    experiments:
      - name: e
        problems: [{problem: lb_quad}]
        algorithms: [{algorithm: output_perturbation}]
        grid: {n: [10, 20, 40], p: [2], epsilon: [1.0]}
        expect:
          - {id: R-n, algorithm: output_perturbation, problem: lb_quad, axis: n, slope: -1}
    audits:
      - name: a
        algorithms: [{algorithm: output_perturbation}]
        problems: [{problem: lb_quad}]
        canaries: [sphere]
        grid: {n: [10], p: [2], epsilon: [1.0], delta: [0.0]}
        budget_s: 1
    """)
#: Per command: at most these seconds and this peak resident memory (issue 33's acceptance).
LIMIT_S = 30.0
LIMIT_BYTES = 2**30
#: The commands that read a store ({store}, {suite}, {out} filled in); ``run`` resumes it. The
#: store has a failed cell: check and report are asked to read it all the same.
COMMANDS: dict[str, tuple[str, ...]] = {
    "status": ("status", "{store}"),
    "check": ("check", "{store}", "--allow-incomplete"),
    "report": ("report", "{store}", "--output", "{out}/r.html", "--allow-incomplete"),
    "export": ("export", "{store}", "--output", "{out}/t.csv"),
    "diff": ("diff", "{store}", "{store}"),
    "plan": ("plan", "{suite}", "--calibrate", "{store}"),
    "run": ("run", "{suite}", "--store", "{store}", "--workers", "0", "--quiet"),
}


# --- the store -----------------------------------------------------------------------------------
def make_pristine(where: Path) -> Path:
    """A finished store of :data:`SUITE` at ``where/s.zarr`` with one failed cell, and the suite at
    ``where/suite.yaml``."""
    import zarr

    from dpbench.config.suite import load_suite
    from dpbench.core.schema import FAILED
    from dpbench.engine.runner import run_suite

    suite = where / "suite.yaml"
    suite.write_text(SUITE)
    store = where / "s.zarr"
    run_suite(load_suite(suite), store, workers=0, progress=False)
    from dpbench.cli.main import main
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(["audit", str(suite), "--store", str(store), "--workers", "0", "--quiet"])
    g = zarr.open_group(str(store / "e"), mode="r+")
    g["error"][0, 0, 0, 0, 0, 0, 0] = "ValueError: a planted failure"
    g["status"][0, 0, 0, 0, 0, 0, 0] = FAILED
    return store


def _meta(store: Path, rel: str) -> Path:
    return store / rel / "zarr.json" if rel else store / "zarr.json"


def _edit(rel: str, change: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    """A damage that rewrites the metadata of node ``rel`` ("" for the root) through ``change``."""
    def damage(store: Path) -> None:
        path = _meta(store, rel)
        doc = json.loads(path.read_text())
        change(doc)
        path.write_text(json.dumps(doc))
    return damage


def _set(*keys: str, value: Any, rel: str = "e") -> Callable[[Path], None]:
    """Set ``doc[keys[0]]...[keys[-1]] = value`` in node ``rel``'s metadata."""
    def change(doc: dict[str, Any]) -> None:
        for k in keys[:-1]:
            doc = doc[k]
        doc[keys[-1]] = value
    return _edit(rel, change)


def _attr(*keys: str, value: Any, rel: str = "e") -> Callable[[Path], None]:
    return _set("attributes", *keys, value=value, rel=rel)


def _chunks(store: Path, var: str) -> list[Path]:
    return [p for p in sorted((store / var).rglob("*")) if p.is_file() and p.name != "zarr.json"]


def _chunk(store: Path, var: str) -> Path:
    return _chunks(store, var)[0]


def _write_chunk(var: str, data: bytes) -> Callable[[Path], None]:
    def damage(store: Path) -> None:
        _chunk(store, var).write_bytes(data)
    return damage


def _symlink(target: str, var: str = "e/excess_risk") -> Callable[[Path], None]:
    def damage(store: Path) -> None:
        chunk = _chunk(store, var)
        chunk.unlink()
        chunk.symlink_to(target)
    return damage


def _fifo(rel: Callable[[Path], Path]) -> Callable[[Path], None]:
    def damage(store: Path) -> None:
        path = rel(store)
        path.unlink()
        os.mkfifo(path)
    return damage


def _zstd(data: bytes) -> bytes:
    from numcodecs import Zstd
    return bytes(Zstd(level=0).encode(data))


def _zstd_bomb(store: Path) -> None:
    """A status chunk that decompresses to 512 MiB of zeros (a zstd frame of kilobytes)."""
    _chunk(store, "e/status").write_bytes(_zstd(b"\0" * 2**29))


def _sparse_metadata(rel: str, size: int) -> Callable[[Path], None]:
    def damage(store: Path) -> None:
        with open(_meta(store, rel), "r+b") as fh:   # sparse: no disk used
            fh.truncate(size)
    return damage


def _deep(rel: str) -> Callable[[Path], None]:
    def damage(store: Path) -> None:
        _meta(store, rel).write_text('{"attributes": ' + "[" * 2000 + "]" * 2000 + "}")
    return damage


def _text(rel: str, text: str) -> Callable[[Path], None]:
    def damage(store: Path) -> None:
        _meta(store, rel).write_text(text)
    return damage


def _delete(rel: str) -> Callable[[Path], None]:
    def damage(store: Path) -> None:
        target = store / rel
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    return damage


def _cell_text(var: str, text: str, status: int | None = None) -> Callable[[Path], None]:
    """Write ``text`` into the first cell of string variable (or coordinate) ``var``."""
    def damage(store: Path) -> None:
        import zarr
        g = zarr.open_group(str(store / "e"), mode="r+")
        arr = g[var]
        arr[(0,) * arr.ndim] = text
        if status is not None:
            g["status"][(0,) * g["status"].ndim] = status
    return damage


def _duplicate_label(store: Path) -> None:
    import zarr
    g = zarr.open_group(str(store / "e"), mode="r+")
    g["n"][:] = [10, 10, 40]


def _swap_dims(meta: dict[str, Any]) -> None:
    names = meta["dimension_names"]
    names[0], names[2] = names[2], names[0]


def _root_attr(value: Any, *keys: str) -> Callable[[Path], None]:
    return _set("attributes", "dpbench_store", *keys, value=value, rel="")


def _huge_attribute(store: Path) -> None:
    path = store / "zarr.json"
    doc = json.loads(path.read_text())
    doc["attributes"]["dpbench_store"]["suite_yaml"] = "x" * (80 * 2**20)
    path.write_text(json.dumps(doc))


def _consistent_seeds(seeds: int) -> Callable[[Path], None]:
    """Claim ``seeds`` seeds in every array's metadata, chunked as dpbench would chunk them."""
    def damage(store: Path) -> None:
        from dpbench.store.layout import allowed_chunk_shapes

        _set("shape", value=[seeds], rel="e/seed")(store)
        _set("chunk_grid", "configuration", "chunk_shape", value=[seeds], rel="e/seed")(store)
        shape = (1, 1, 3, 1, 1, 1, seeds)
        for var in _variables(store):
            chunks = max(allowed_chunk_shapes(var, shape))
            _set("shape", value=list(shape), rel=f"e/{var}")(store)
            _set("chunk_grid", "configuration", "chunk_shape", value=list(chunks),
                 rel=f"e/{var}")(store)
    return damage


def _variables(store: Path) -> list[str]:
    return [p.name for p in (store / "e").iterdir()
            if p.is_dir() and len(json.loads((p / "zarr.json").read_text())["shape"]) == 7]


V = "e/excess_risk"   # a value variable
S = "e/status"
C = "e/n"             # a coordinate

#: Every damage, by category: name → function of the store's path.
DAMAGES: dict[str, dict[str, Callable[[Path], None]]] = {
    "chunk grid": {
        "status chunk shape negative": _set("chunk_grid", "configuration", "chunk_shape",
                                            value=[1, 1, -3, 1, 1, 1, 2], rel=S),
        "status chunk shape zero": _set("chunk_grid", "configuration", "chunk_shape",
                                        value=[1, 1, 0, 1, 1, 1, 2], rel=S),
        "status chunk shape huge": _set("chunk_grid", "configuration", "chunk_shape",
                                        value=[1, 1, 2**40, 1, 1, 1, 2], rel=S),
        "value chunk shape zero": _set("chunk_grid", "configuration", "chunk_shape",
                                       value=[0, 1, 3, 1, 1, 1, 2], rel=V),
        "value chunk shape of wrong rank": _set("chunk_grid", "configuration", "chunk_shape",
                                                value=[1, 3, 2], rel=V),
        "value chunk shape a string": _set("chunk_grid", "configuration", "chunk_shape",
                                           value="x", rel=V),
        "value chunk shape floats": _set("chunk_grid", "configuration", "chunk_shape",
                                         value=[1.5, 1, 3, 1, 1, 1, 2], rel=V),
        "coordinate chunk shape zero": _set("chunk_grid", "configuration", "chunk_shape",
                                            value=[0], rel=C),
        "unknown chunk grid": _set("chunk_grid", "name", value="rectilinear", rel=V),
        "unknown chunk key encoding": _set("chunk_key_encoding", "name", value="weird", rel=V),
    },
    "shape": {
        "value shape of wrong rank": _set("shape", value=[1, 3, 2], rel=V),
        "value shape longer than its coordinate": _set("shape", value=[1, 1, 5, 1, 1, 1, 2], rel=V),
        "status shape negative": _set("shape", value=[1, 1, -3, 1, 1, 1, 2], rel=S),
        "status shape huge": _set("shape", value=[1, 1, 3, 1, 1, 1, 2**40], rel=S),
        "coordinate longer than the cube": _set("shape", value=[7], rel=C),
        "coordinate shape null": _set("shape", value=None, rel=C),
        "every shape huge and consistent": _consistent_seeds(10**6),
    },
    "data type": {
        "status stored as float64": _set("data_type", value="float64", rel=S),
        "value stored as string": _set("data_type", value="string", rel=V),
        "error stored as int64": _set("data_type", value="int64", rel="e/error"),
        "coordinate stored as string": _set("data_type", value="string", rel=C),
        "unknown data type": _set("data_type", value="complex1024", rel=V),
        "fill value of the wrong type": _set("fill_value", value="x", rel=V),
        "fill value null": _set("fill_value", value=None, rel=S),
    },
    "dimension names": {
        "dimension names swapped": _edit(S, _swap_dims),
        "dimension names null": _set("dimension_names", value=None, rel=S),
        "dimension names of wrong length": _set("dimension_names", value=["algorithm"], rel=V),
        "dimension names unknown": _set("dimension_names",
                                        value=["a", "b", "c", "d", "e", "f", "g"], rel=V),
        "coordinate named for another axis": _set("dimension_names", value=["p"], rel=C),
        "dimension name a number": _set("dimension_names", value=[1], rel=C),
    },
    "codecs": {
        "unknown codec": _set("codecs", value=[{"name": "bytes"}, {"name": "lzma9"}], rel=V),
        "no codecs": _set("codecs", value=[], rel=S),
        "codec configuration garbage": _set("codecs", value=[{"name": "bytes"},
                                                            {"name": "zstd",
                                                             "configuration": "fast"}], rel=V),
        "codecs a string": _set("codecs", value="zstd", rel=S),
        "storage transformer": _set("storage_transformers", value=[{"name": "x"}], rel=V),
    },
    "chunk data": {
        "garbage status chunk": _write_chunk(S, b"\x00garbage" * 50),
        "garbage value chunk": _write_chunk(V, b"\x00garbage" * 50),
        "garbage error chunk": _write_chunk("e/error", b"\x00garbage" * 50),
        "garbage coordinate chunk": _write_chunk(C, b"\x00garbage" * 50),
        "empty status chunk": _write_chunk(S, b""),
        "status chunk of the wrong size": _write_chunk(S, _zstd(b"\1" * 5)),
        "value chunk of the wrong size": _write_chunk(V, _zstd(b"\0" * 7)),
        "status chunk out of range": _write_chunk(S, _zstd(b"\7" * 6)),
        "status chunk a decompression bomb": _zstd_bomb,
        "status chunk missing": lambda s: _chunk(s, S).unlink(),
        "coordinate chunk missing": lambda s: _chunk(s, C).unlink(),
        "stray file in a chunk folder": lambda s: (s / S / "c" / "stray").write_bytes(b"x"),
    },
    "file kinds": {
        "chunk -> /dev/zero": _symlink("/dev/zero"),
        "chunk -> /dev/urandom": _symlink("/dev/urandom", S),
        "chunk -> /etc/passwd": _symlink("/etc/passwd"),
        "chunk -> itself": lambda s: _symlink(str(_chunk(s, V)))(s),
        "status chunk is a FIFO": _fifo(lambda s: _chunk(s, S)),
        "group zarr.json is a FIFO": _fifo(lambda s: s / "e" / "zarr.json"),
        "root zarr.json is a FIFO": _fifo(lambda s: s / "zarr.json"),
        "array zarr.json -> /dev/zero": lambda s: (_meta(s, S).unlink(),
                                                   _meta(s, S).symlink_to("/dev/zero")),
        "experiment folder -> /": lambda s: (shutil.rmtree(s / "e"), (s / "e").symlink_to("/")),
    },
    "metadata documents": {
        "group zarr.json of 100 MB": _sparse_metadata("e", 100 * 2**20),
        "root zarr.json nested 2000 deep": _deep(""),
        "group zarr.json nested 2000 deep": _deep("e"),
        "array zarr.json nested 2000 deep": _deep(S),
        "group zarr.json not JSON": _text("e", "{not json"),
        "array zarr.json empty": _text(V, ""),
        "group zarr.json a list": _text("e", "[1, 2]"),
        "array zarr.json null": _text(S, "null"),
        "root node an array": _set("node_type", value="array", rel=""),
        "group node an array": _set("node_type", value="array", rel="e"),
        "array node a group": _set("node_type", value="group", rel=S),
        "zarr format 2": _set("zarr_format", value=2, rel=V),
        "unknown top-level key": _set("surprise", value={"must_understand": True}, rel=V),
        "unknown top-level key in a group": _set("surprise", value=1, rel="e"),
        "root attributes a list": _set("attributes", value=[1], rel=""),
        "array zarr.json NaN shape": _text(C, '{"shape": [NaN], "zarr_format": 3}'),
        "root attribute of 80 MB": _huge_attribute,
    },
    "root attributes": {
        "store entry a string": _root_attr("x"),
        "schema a string": _root_attr("x", "schema"),
        "schema from the future": _root_attr(99, "schema"),
        "runs a string": _root_attr("x", "runs"),
        "runs of numbers": _root_attr([1, 2], "runs"),
        "run timings garbage": _root_attr([{"timings": {"a|b": {"seconds": "x"}}}], "runs"),
        "run timings a list": _root_attr([{"timings": [1]}], "runs"),
        "summary garbage": _root_attr({"rows": "x", "status_files": 1}, "status_summary"),
        "summary rows short": _root_attr({"rows": [["e"]], "status_files": "x"},
                                         "status_summary"),
        "suite text a number": _root_attr(5, "suite_yaml"),
        "root seed a string": _root_attr("x", "root_seed"),
        "version a list": _root_attr([1], "dpbench_version"),
    },
    "experiment attributes": {
        "algorithms a list of numbers": _attr("algorithms", value=[1]),
        "algorithms a string": _attr("algorithms", value="x"),
        "algorithm entry a number": _attr("algorithms", "output_perturbation", value=3),
        "rate card garbage": _attr("algorithms", "output_perturbation", "rate_card",
                                   value={"exponents": "x"}),
        "problems garbage": _attr("problems", value={"lb_quad": [1]}),
        "expectations garbage": _attr("expectations", value=[{"id": 1, "slope": "x"}]),
        "expectations a string": _attr("expectations", value="x"),
        "expectation of unknown axis": _attr("expectations", value=[{
            "id": "X", "algorithm": "output_perturbation", "problem": "lb_quad",
            "axis": "nope", "slope": -1}]),
        "experiment entry garbage": _attr("dpbench_experiment", value=[1]),
        "fingerprint a number": _attr("dpbench_experiment", "fingerprint", value=5),
        "definition a list": _attr("dpbench_experiment", "definition", value=[1]),
        "initialised a string": _attr("dpbench_experiment", "initialised", value="yes"),
        "experiment schema from the future": _attr("dpbench_experiment", "schema", value=99),
        "seeds a string": _attr("seeds", value="x"),
        "status codes garbage": _attr("status_codes", value=7),
        "packages a list": _attr("packages", value=[1]),
        "normalisation a dict": _attr("normalisation", value={"a": 1}),
        "audit group garbage": _attr("dpbench_audit", value="x", rel="audit/a"),
        "audit state garbage": _attr("state", value=[1, 2], rel="audit/a"),
        "audit settings garbage": _attr("alpha_total", value="x", rel="audit/a"),
    },
    "structure": {
        "a variable missing": _delete(V),
        "a coordinate missing": _delete(C),
        "status missing": _delete(S),
        "a stray array": lambda s: shutil.copytree(s / V, s / "e" / "stray"),
        "a stray group": lambda s: shutil.copytree(s / "e", s / "f"),
        "an empty folder": lambda s: (s / "g").mkdir(),
        "experiment metadata missing": _delete("e/zarr.json"),
        "audit group metadata missing": _delete("audit/a/zarr.json"),
    },
    "stored text": {
        "algorithm label of 1 MB": _cell_text("algorithm", "A" * 2**20),
        "error of 5 MB": _cell_text("error", "E" * (5 * 2**20), status=2),
        "terminal escapes in an error": _cell_text("error", "\x1b]0;TITLE\x07\x1b[2Jboom",
                                                   status=2),
        "terminal escapes in a label": _cell_text("algorithm", "\x1b[2J\x1b[31mred"),
        "duplicate grid values": _duplicate_label,
        "empty label": _cell_text("problem", ""),
        "label with a slash and a newline": _cell_text("algorithm", "a/b\nc"),
    },
}


# --- the driver ----------------------------------------------------------------------------------
class _Hung(BaseException):
    """A command ran past :data:`LIMIT_S` (a BaseException: no command catches it)."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Hung()


def snapshot(root: Path) -> str:
    """A digest of every entry under ``root``: its kind, size, modification time and inode
    (``lstat``: symbolic links are not followed, FIFOs not opened). A write, in place or by
    rename, changes it."""
    h = hashlib.sha256()
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(dirs + files):
            p = os.path.join(folder, name)
            st = os.lstat(p)
            h.update(f"{os.path.relpath(p, root)}|{st.st_mode}|{st.st_size}|{st.st_mtime_ns}|"
                     f"{st.st_ino}|".encode())
            if os.path.islink(p):
                h.update(os.readlink(p).encode())
    return h.hexdigest()


class _PeakRss:
    """The peak resident memory of this process while in the context (sampled every 10 ms)."""

    def __enter__(self) -> _PeakRss:
        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        while True:
            with open("/proc/self/statm") as fh:
                self.peak = max(self.peak, int(fh.read().split()[1]) * page)
            if self._stop.wait(0.01):
                return

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@contextlib.contextmanager
def _within(seconds: float) -> Iterator[None]:
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_command(argv: list[str]) -> dict[str, Any]:
    """Run one dpbench command in this process: its exit code (``"hung"`` past the limit,
    ``"traceback"`` on an exception that escaped), seconds, peak memory and printed text."""
    from dpbench.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    code: Any
    with _PeakRss() as rss, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            with _within(LIMIT_S):
                code = main(argv)
        except _Hung:
            code = "hung"
        except SystemExit as exc:
            code = exc.code
        except BaseException as exc:  # noqa: BLE001 - what escaped main is the finding
            import traceback
            code = "traceback"
            err.write("".join(traceback.format_exception(exc))[-3000:])
    text = err.getvalue()
    return {"code": code, "seconds": round(time.perf_counter() - start, 2), "peak": rss.peak,
            "traceback": "Traceback" in text or code == "traceback",
            "stderr": text[-1500:], "stdout_chars": len(out.getvalue())}


def judge(command: str, result: dict[str, Any], store_same: bool, outside_same: bool) -> list[str]:
    """What is wrong with one command's outcome on a damaged store (empty: nothing)."""
    bad = []
    if result["code"] not in (0, 2) and not (command == "check" and result["code"] == 1
                                             and not result["traceback"]):
        bad.append(f"exit {result['code']}")
    if result["traceback"]:
        bad.append("traceback")
    if result["seconds"] > LIMIT_S:
        bad.append(f"{result['seconds']} s")
    if result["peak"] > LIMIT_BYTES:
        bad.append(f"{result['peak'] / 2**20:.0f} MB")
    # ``run`` is the writer: it may change the store when it resumes it (exit 0), or when the
    # damage is in a chunk it meets while writing results (exit 2, the cells before it kept).
    writer_ok = command == "run" and (result["code"] == 0 or "while writing" in result["stderr"])
    if not store_same and not writer_ok:
        bad.append("store changed")
    if not outside_same:
        bad.append("wrote outside its outputs")
    return bad


def drive(category: str, pristine: Path, work: Path) -> Iterator[dict[str, Any]]:
    """Every damage of ``category`` through every command (see the module docstring)."""
    suite = pristine.parent / "suite.yaml"
    for name, damage in DAMAGES[category].items():
        case = work / f"case-{abs(hash(name))}"
        store, out, cwd = case / "s.zarr", case / "out", case / "cwd"
        shutil.copytree(pristine, store, symlinks=True)
        out.mkdir()
        cwd.mkdir()
        damage(store)
        before = snapshot(store)
        for command, template in COMMANDS.items():
            argv = [a.format(store=store, suite=suite, out=out) for a in template]
            os.chdir(cwd)
            result = run_command(argv)
            os.chdir(work)
            after = snapshot(store)
            store_same, before = after == before, after
            outside_same = not any(cwd.iterdir()) and sorted(p.name for p in case.iterdir()) \
                == ["cwd", "out", "s.zarr"] and all(p.name in ("r.html", "r.md", "t.csv")
                                                    for p in out.iterdir())
            yield {"damage": name, "command": command, **result,
                   "problems": judge(command, result, store_same, outside_same)}
            for p in out.iterdir():
                p.unlink()
        shutil.rmtree(case, ignore_errors=True)


def main(argv: list[str]) -> int:
    category, pristine, work = argv[0], Path(argv[1]), Path(argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (8 * 2**30, resource.RLIM_INFINITY))
    for row in drive(category, pristine, work):
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
