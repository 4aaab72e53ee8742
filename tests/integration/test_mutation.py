"""Property-based mutation tests: mutated suites and cluster profiles never crash the CLI.

Hypothesis starts from valid inputs (small suites written here, the shipped suites under
``suites/``, the shipped cluster profiles under ``cluster/``) and mutates them: a key deleted, an
unknown key added, a value replaced by one of another type (None, bools, zero, negative and huge
integers, nan/inf/1e300, path-like, reserved, very long and unicode strings, lists, nested
mappings), list entries duplicated, lists emptied, grid values changed, plugins renamed; then,
sometimes, the YAML text itself (truncated, random characters inserted, anchors and aliases,
tags such as ``!!python/object``, bytes that are not UTF-8).

The property (docs/reliability.md, 'Mutation tests'): the CLI (``dpbench.cli.main.main``, run in
process) exits 0 or 2 (argparse's ``SystemExit`` counts), never raises or prints a traceback, and
when it exits 2 the working directory is unchanged (names, sizes, modification times: no store,
no lock, no report). Every example gets a fresh directory. ``derandomize=True``: the examples are
a function of the test's code, so a CI run is reproducible and cannot be flaky.

Commands: ``validate`` on every mutated suite; ``run --backend inline`` (and ``audit``) on the
ones ``validate`` refuses (they must be refused too, with nothing written) and on the accepted
ones that are cheap (output_perturbation / nonprivate_erm on lb_quad, n <= 50, p <= 3);
``profile`` on mutated profiles and, when ``profile`` refuses one, ``run --cluster`` with it (it
must be refused too). No batch system is ever used: the submission commands are taken off
``PATH`` and constructing a dask cluster during ``run --cluster`` fails the test.
"""

from __future__ import annotations

import copy
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from dpbench.cli.main import main
from dpbench.engine.backends.job_checks import SUBMIT_COMMANDS

ROOT = Path(__file__).resolve().parents[2]

# --- valid starting points -----------------------------------------------------------------------

GOOD = {
    "name": "mutant",
    "root_seed": 1,
    "seeds": 2,
    "experiments": [{
        "name": "e",
        "problems": [{"problem": "lb_quad"}],
        "algorithms": [{"algorithm": "output_perturbation"}],
        "grid": {"n": [10, 20], "p": [2], "epsilon": [1.0]},
    }],
}
#: Every field a suite may hold, still cheap to run (8 + 4 cells of lb_quad).
RICH = {
    "name": "rich",
    "description": "every field",
    "root_seed": 3,
    "seeds": 2,
    "cell_timeout_s": 60,
    "cell_memory_mb": 4000,
    "max_cells": 1000,
    "experiments": [
        {"name": "pure", "description": "d", "seeds": 1,
         "problems": [{"problem": "lb_quad", "label": "quad", "params": {"radius": 2.0}}],
         "algorithms": [{"algorithm": "output_perturbation", "label": "op",
                         "params": {"solver_gap": 1e-8}},
                        {"algorithm": "nonprivate_erm"}],
         "grid": {"n": [10, 20], "p": [1, 2], "epsilon": [1.0], "delta": [0.0],
                  "data_norm": [0.5]},
         "expect": [{"id": "R", "algorithm": "op", "problem": "quad", "axis": "n", "slope": -2,
                     "tolerance": 0.3, "tolerance_reason": "few seeds", "at": {"p": 2},
                     "variable": "excess_risk", "level_tolerance": 0.1, "source": "BST14"}]},
        {"name": "ref", "problems": ["lb_quad"], "algorithms": ["nonprivate_erm"],
         "grid": {"n": [10, 30], "p": [3], "epsilon": [0.5, 2.0]}},
    ],
}
AUDIT = {
    "name": "mutant_audit", "root_seed": 1,
    "audit": {"alpha": 0.05, "runs": 200, "batch": 100},
    "audits": [{"name": "a", "description": "d",
                "algorithms": [{"algorithm": "output_perturbation"}],
                "problems": [{"problem": "lb_quad"}], "canaries": ["sphere"],
                "grid": {"n": [10], "p": [2], "epsilon": [1.0], "delta": [0.0]},
                "runs": 200, "batch": 100, "expect": "private"}],
}
SHIPPED_SUITES = sorted((ROOT / "suites").glob("*.yaml"))

#: Algorithms and problems that keep a run cheap, and the bounds of a cheap run.
CHEAP_ALGORITHMS = frozenset({"output_perturbation", "nonprivate_erm"})
CHEAP_PROBLEMS = frozenset({"lb_quad"})
CHEAP_MAX_N, CHEAP_MAX_P, CHEAP_MAX_CELLS = 50, 3, 64


def _shipped_profiles() -> dict[str, str]:
    """The shipped profiles, as templates (with CHANGE-ME) and filled in as a user would."""
    out = {}
    for path in sorted((ROOT / "cluster").glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        # never create directories outside the test's (slurm-local.yaml logs to /tmp/...)
        text = text.replace("log_directory: /tmp/dpbench-slurm/jobs", "log_directory: logs")
        out[path.stem] = text
        if "CHANGE-ME" in text:
            out[f"{path.stem}-filled"] = (
                text.replace("CHANGE-ME-partition", "compute").replace("CHANGE-ME-queue", "workq")
                .replace("CHANGE-ME-account", "proj42")
                .replace("CHANGE-ME/dpbench", "registry.example.org/dpbench"))
    return out


PROFILES = _shipped_profiles()

# --- the mutations -------------------------------------------------------------------------------

WEIRD_INTS = (-(2**63), -1, 0, 1, 2, 3, 7, 10**9, 2**63, 10**30, 10**400)
WEIRD_FLOATS = (0.0, -0.0, 0.5, 1.0, -1.0, 1e-300, 1e300, -1e300, math.inf, -math.inf, math.nan)
WEIRD_STRINGS = ("", " ", "x", "../x", "/etc/passwd", "zarr.json", "dpbench.lock", "NUL",
                 "nul.txt", "audit", "a.json", "CHANGE-ME", "x" * 5000, "é", "名前", "a\nb",
                 "abc\n", "\u202eabc", "1e-6", "1_000", "yes", "null", "~", "*a", "&a", "!!int 1",
                 "tcp://127.0.0.1:1", "01:00:00", "50m", "4GB", "--lifetime")
#: Values of the run tests: small (valid suites stay cheap: _cheap filters the others out), and
#: the extremes of fields that cost nothing (root_seed, max_cells, the per-cell limits).
SMALL_INTS = (-1, 0, 1, 2, 3, 5, 2**63, 2**64, 10**30, 10**400)
SMALL_FLOATS = (0.0, -0.0, 0.5, 1.0, -1.0, 1e-6, 1e-300, 1e300, math.inf, -math.inf, math.nan)
SHORT_STRINGS = tuple(s for s in WEIRD_STRINGS if len(s) < 100)
KEYS = ("nam", "Name", "experimentz", "grid ", "seed", "params", "lr", "kwarg", "1", "",
        "audit", "expect", "at", "<<", "cluster", "kwargs", "n_worker", "walltim", "jobs",
        "distributed.scheduler.allowed-failure", "distributed.nope")


def _scalars(small: bool) -> st.SearchStrategy[Any]:
    ints = SMALL_INTS if small else WEIRD_INTS
    floats = SMALL_FLOATS if small else WEIRD_FLOATS
    strings = SHORT_STRINGS if small else WEIRD_STRINGS
    return st.one_of(st.none(), st.booleans(), st.sampled_from(ints), st.sampled_from(floats),
                     st.sampled_from(strings), st.integers(-3, 100),
                     st.floats(allow_nan=True, allow_infinity=True),
                     st.text(max_size=12))


def _values(small: bool) -> st.SearchStrategy[Any]:
    """Replacement values: scalars of every type, lists and nested mappings of them."""
    return st.recursive(
        _scalars(small),
        lambda inner: st.one_of(st.lists(inner, max_size=3),
                                st.dictionaries(st.one_of(st.sampled_from(KEYS),
                                                          st.text(max_size=6)),
                                                inner, max_size=3)),
        max_leaves=6)


GRID_VALUES = st.one_of(st.integers(-2, 60), st.sampled_from((0.0, 1e-5, 0.5, 0.999999, 1.0,
                                                              2.0, 1e-300, 1e300, math.inf,
                                                              math.nan, 2.5, "10", "x", None,
                                                              True, 10**12, [], {})))
#: Grid values of the run tests: mostly valid and cheap (n <= 50, p <= 3), some not.
SMALL_GRID_VALUES = st.one_of(st.integers(1, 50), st.integers(-1, 4),
                              st.sampled_from((1e-5, 0.5, 0.999999, 1.0, 2.0, 1e-300, 1e300,
                                               math.inf, math.nan, 0.0, "10", None, True)))
PLUGIN_NAMES = ("output_perturbation", "nonprivate_erm", "lb_quad", "output_perturbaton",
                "lb_quadd", "noisy_sgd", "broken_noise_halved", "exp_mech", "mean_est",
                "OUTPUT_PERTURBATION", "", "x" * 300, "../lb_quad", "lb_quad ")
CHEAP_PLUGIN_NAMES = ("output_perturbation", "nonprivate_erm", "lb_quad", "output_perturbaton",
                      "lb_quadd", "", "OUTPUT_PERTURBATION", "../lb_quad", "lb_quad ",
                      "output_perturbation", "nonprivate_erm", "lb_quad")

Path_ = tuple[Any, ...]


def _paths(tree: Any, prefix: Path_ = ()) -> list[Path_]:
    """Every path to a node of ``tree`` (the root included), depth first."""
    out = [prefix]
    if isinstance(tree, dict):
        for k, v in tree.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out += _paths(v, (*prefix, i))
    return out


def _get(tree: Any, path: Path_) -> Any:
    for k in path:
        tree = tree[k]
    return tree


def _set(tree: Any, path: Path_, value: Any) -> Any:
    if not path:
        return value
    _get(tree, path[:-1])[path[-1]] = value
    return tree


def _delete(tree: Any, path: Path_) -> Any:
    if not path:
        return None
    parent = _get(tree, path[:-1])
    if isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent.pop(path[-1])
    return tree


OPERATIONS = ("delete", "add_key", "replace", "duplicate", "empty", "grid", "rename", "retype")
#: The run tests favour the mutations that can leave a suite valid (so that some of it runs).
SMALL_OPERATIONS = (*OPERATIONS, "grid", "grid", "grid", "rename", "rename", "delete")


@st.composite
def mutated_tree(draw: st.DrawFn, base: Any, small: bool = False, max_mutations: int = 2) -> Any:
    """``base`` after 1..max_mutations structural mutations (:data:`OPERATIONS`)."""
    tree = copy.deepcopy(base)
    values = _values(small)
    for _ in range(draw(st.integers(1, max_mutations))):
        op = draw(st.sampled_from(SMALL_OPERATIONS if small else OPERATIONS))
        paths = _paths(tree)[1:] or [()]  # the root is replaced by the text mutations
        if op == "delete":
            tree = _delete(tree, draw(st.sampled_from(paths)))
        elif op == "add_key":
            dicts = [p for p in paths if isinstance(_get(tree, p), dict)]
            if dicts:
                node = _get(tree, draw(st.sampled_from(dicts)))
                node[draw(st.one_of(st.sampled_from(KEYS), st.text(max_size=8), st.integers(),
                                    st.booleans(), st.none()))] = draw(values)
        elif op == "replace":
            tree = _set(tree, draw(st.sampled_from(paths)), draw(values))
        elif op == "duplicate":
            lists = [p for p in paths if isinstance(_get(tree, p), list) and _get(tree, p)]
            if lists:
                node = _get(tree, draw(st.sampled_from(lists)))
                node.append(copy.deepcopy(draw(st.sampled_from(node))))
        elif op == "empty":
            containers = [p for p in paths if isinstance(_get(tree, p), (list, dict))]
            if containers:
                p = draw(st.sampled_from(containers))
                tree = _set(tree, p, type(_get(tree, p))())
        elif op == "grid":
            cells = [p for p in paths if "grid" in p[:-1] and not isinstance(_get(tree, p), dict)]
            if cells:
                tree = _set(tree, draw(st.sampled_from(cells)),
                            draw(SMALL_GRID_VALUES if small else GRID_VALUES))
        elif op == "rename":
            named = [p for p in paths if p and p[-1] in ("problem", "algorithm")]
            if named:
                names = CHEAP_PLUGIN_NAMES if small else PLUGIN_NAMES
                tree = _set(tree, draw(st.sampled_from(named)), draw(st.sampled_from(names)))
        elif op == "retype":  # the same value in another type: 2 -> 2.0 / "2" / [2]
            p = draw(st.sampled_from(paths))
            v = _get(tree, p)
            kind = draw(st.sampled_from(("str", "float", "list", "int")))
            if kind == "str":
                v = str(v)
            elif kind == "float" and isinstance(v, (int, float)) and not isinstance(v, bool):
                v = float(v)
            elif kind == "int" and isinstance(v, float) and math.isfinite(v):
                v = int(v)
            elif kind == "list":
                v = [v]
            tree = _set(tree, p, v)
    return tree


TAGS = ("!!python/object/apply:os.system ['touch PWNED'] ", "!!python/object:builtins.dict ",
        "!!python/name:os.system ", "!!binary ", "!!set ", "!!omap ", "!!pairs ",
        "!!timestamp ", "!!str ", "!!int ", "!!float ", "!!bool ", "!!null ", "!!map ",
        "!!seq ", "!custom ", "!<tag:yaml.org,2002:str> ")
SNIPPETS = ("\n_a: &a {name: x}\n_b: *a\n", "\n_s: &s [*s]\n", "\n_m: &m {x: 1}\n_n: {<<: *m}\n",
            "\n_l: &l [a, a, a, a]\n_l2: &l2 [*l, *l, *l, *l]\n_l3: [*l2, *l2, *l2, *l2]\n",
            "\n? [a, b]\n: 1\n", "\n? {a: 1}\n: 1\n", "\n%YAML 1.1\n", "\n---\nname: second\n",
            "\n...\n", "\x00", "\ufeff", "\t", "\r", "\\", "\n" + "[" * 200 + "]" * 200 + "\n",
            "\n_d: " + "[" * 2000 + "\n", "\n2001-12-14: date\n", "\n_t: 2001-12-14t21:59:43\n",
            "\n_f: .nan\n_g: -.inf\n", "\n_o: 0o777\n_x: 0x_ff\n", "\n_y: yes\n_n2: off\n")
CHARS = st.text(alphabet=st.sampled_from(list(":-[]{}&*!|>#%@`'\"\t\n ,?~\\") + ["\x00", "\ufeff",
                                              "é", "\u2028", "\x85", "\x7f"]),
                min_size=1, max_size=6)


@st.composite
def mutated_text(draw: st.DrawFn, text: str) -> str | bytes:
    """``text`` after text-level mutations (in a third of the examples); sometimes as bytes that
    are not UTF-8."""
    for _ in range(draw(st.sampled_from((0, 0, 0, 0, 1, 2)))):
        op = draw(st.sampled_from(("truncate", "insert", "tag", "snippet", "alias")))
        k = draw(st.sampled_from(range(len(text) + 1)))
        if op == "truncate":
            text = text[:k]
        elif op == "insert":
            text = text[:k] + draw(CHARS) + text[k:]
        elif op == "tag":
            colons = [i for i in range(len(text) - 1) if text[i:i + 2] in (": ", "- ")]
            if colons:
                i = draw(st.sampled_from(colons)) + 2
                text = text[:i] + draw(st.sampled_from(TAGS)) + text[i:]
        elif op == "snippet":
            text = (text + draw(st.sampled_from(SNIPPETS)) if draw(st.booleans())
                    else text[:k] + draw(st.sampled_from(SNIPPETS)) + text[k:])
        elif op == "alias":  # anchor one value, refer to it in place of a later one
            lines = text.split("\n")
            values = [i for i, line in enumerate(lines) if ": " in line or "- " in line]
            if len(values) >= 2:
                i, j = sorted(draw(st.lists(st.sampled_from(values), min_size=2, max_size=2,
                                            unique=True)))
                sep_i = ": " if ": " in lines[i] else "- "
                sep_j = ": " if ": " in lines[j] else "- "
                head, _, tail = lines[i].partition(sep_i)
                lines[i] = f"{head}{sep_i}&z {tail}"
                lines[j] = lines[j].partition(sep_j)[0] + sep_j + "*z"
                text = "\n".join(lines)
    if draw(st.sampled_from(range(20))) == 19:
        raw = text.encode("utf-8")
        k = draw(st.sampled_from(range(len(raw) + 1)))
        return raw[:k] + draw(st.sampled_from((b"\xff", b"\xfe\xff", b"\xc3", b"\xed\xa0\x80",
                                               b"\x80abc"))) + raw[k:]
    return text


def _dump(tree: Any) -> str:
    return yaml.safe_dump(tree, sort_keys=False, allow_unicode=True, width=10_000)


def suite_inputs(bases: list[Any], small: bool = False) -> st.SearchStrategy[str | bytes]:
    """Suite texts: a base mutated as a tree, then perhaps as text."""
    return st.sampled_from(bases).flatmap(
        lambda base: mutated_tree(base, small=small, max_mutations=1 if small else 2).map(_dump)
        .flatmap(mutated_text))


def profile_inputs(names: list[str]) -> st.SearchStrategy[str | bytes]:
    return st.sampled_from(names).flatmap(
        lambda name: mutated_tree(yaml.safe_load(PROFILES[name])).map(_dump)
        .flatmap(mutated_text))


# --- running the CLI -----------------------------------------------------------------------------

def _listing(d: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for p in sorted(d.rglob("*")):
        st_ = p.lstat()
        out[str(p.relative_to(d))] = (st_.st_size if p.is_file() else -1, st_.st_mtime_ns)
    return out


class Workspace:
    """A fresh directory per hypothesis example (function-scoped fixtures are shared by all the
    examples of a test), made the working directory, and the CLI run inside it."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                 monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp_path, self.capsys, self.monkeypatch = tmp_path, capsys, monkeypatch
        self.err = ""  # the stderr of the last command

    def new(self, files: dict[str, str | bytes]) -> Path:
        d = Path(tempfile.mkdtemp(dir=self.tmp_path))
        for name, content in files.items():
            if isinstance(content, bytes):
                (d / name).write_bytes(content)
            else:
                (d / name).write_text(content, encoding="utf-8")
            if currently_in_test_context():  # under hypothesis: shown with a failing example
                note(f"{name}:\n{content!r}")
        self.monkeypatch.chdir(d)
        return d

    def cli(self, d: Path, *argv: str) -> int:
        """``dpbench ARGV`` in ``d``: asserts the property (exit 0 or 2, no traceback, nothing
        written on 2) and returns the exit code."""
        before = _listing(d)
        self.capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse
            code = exc.code
        out, err = self.capsys.readouterr()
        self.err = err
        code = 0 if code is None else code
        assert code in (0, 2), f"dpbench {' '.join(argv)} exited {code!r}:\n{err[-3000:]}"
        assert "Traceback" not in err and "Traceback" not in out, err[-3000:]
        if code == 2:
            assert err.strip(), "exit 2 without a message"
            assert _listing(d) == before, f"dpbench {' '.join(argv)} exited 2 but wrote files"
        assert not (d / "PWNED").exists() and not Path("PWNED").exists()
        return code


@pytest.fixture
def ws(tmp_path: Path, capsys: pytest.CaptureFixture[str],
       monkeypatch: pytest.MonkeyPatch) -> Workspace:
    # No batch system: without its submission command a batch profile is refused before
    # anything starts (this machine may have a real SLURM).
    keep = [p for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and not any((Path(p) / c).exists() for c in set(SUBMIT_COMMANDS.values()))]
    monkeypatch.setenv("PATH", os.pathsep.join(keep))
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    return Workspace(tmp_path, capsys, monkeypatch)


def _cheap(path: Path) -> bool:
    """Whether the (valid) suite at ``path`` runs in well under a second, cells that can
    succeed (no starved per-cell limits)."""
    from dpbench.config.suite import load_suite

    suite = load_suite(path)
    if suite.n_cells > CHEAP_MAX_CELLS or not suite.experiments:
        return False
    if (suite.cell_timeout_s is not None and suite.cell_timeout_s < 10) or \
            (suite.cell_memory_mb is not None and suite.cell_memory_mb < 1000):
        return False
    return all(
        {a.name for a in e.algorithms} <= CHEAP_ALGORITHMS
        and {p.name for p in e.problems} <= CHEAP_PROBLEMS
        and max(e.grid["n"]) <= CHEAP_MAX_N and max(e.grid["p"]) <= CHEAP_MAX_P
        for e in suite.experiments)


def _check_suite(ws: Workspace, text: str | bytes, run: bool) -> None:
    d = ws.new({"suite.yaml": text})
    code = ws.cli(d, "validate", "suite.yaml")
    event(f"validate exits {code}")
    if not run:
        return
    store = str(d / "s.zarr")
    if code == 2:  # what validate refuses, run and audit refuse, writing nothing
        assert ws.cli(d, "run", "suite.yaml", "--store", store, "--backend", "inline",
                      "--quiet") == 2
        assert ws.cli(d, "audit", "suite.yaml", "--store", store, "--workers", "0",
                      "--quiet") == 2
    elif _cheap(d / "suite.yaml"):
        code = ws.cli(d, "run", "suite.yaml", "--store", store, "--backend", "inline", "--quiet")
        event(f"run exits {code}")


def _forbid_clusters(monkeypatch: pytest.MonkeyPatch) -> None:
    """Constructing any dask cluster manager fails the test (``run --cluster`` must refuse the
    profile before it starts anything)."""
    from distributed.deploy.cluster import Cluster

    def refuse(self: Any, *args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"run --cluster started a {type(self).__name__}")

    monkeypatch.setattr(Cluster, "__init__", refuse)


def _check_profile(ws: Workspace, text: str | bytes) -> None:
    d = ws.new({"profile.yaml": text, "suite.yaml": _dump(GOOD)})
    code = ws.cli(d, "profile", "profile.yaml")
    event(f"profile exits {code}")
    if code == 0:
        return  # an accepted profile would start a cluster: not run here
    with pytest.MonkeyPatch.context() as mp:
        _forbid_clusters(mp)
        assert ws.cli(d, "run", "suite.yaml", "--store", str(d / "s.zarr"), "--cluster",
                      "profile.yaml", "--quiet") == 2


COMMON = dict(deadline=None, derandomize=True, database=None, print_blob=False,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                     HealthCheck.data_too_large, HealthCheck.filter_too_much])


def _shipped_suite_trees() -> list[Any]:
    return [yaml.safe_load(p.read_text(encoding="utf-8")) for p in SHIPPED_SUITES]


# --- the fast part (the development loop) --------------------------------------------------------

@settings(max_examples=150, **COMMON)
@given(text=suite_inputs([GOOD, RICH, AUDIT]))
def test_mutated_suites_validate_cleanly(ws: Workspace, text: str | bytes) -> None:
    _check_suite(ws, text, run=False)


@settings(max_examples=40, **COMMON)
@given(text=suite_inputs([GOOD, AUDIT], small=True))
def test_mutated_small_suites_run_cleanly(ws: Workspace, text: str | bytes) -> None:
    _check_suite(ws, text, run=True)


@settings(max_examples=30, **COMMON)
@given(text=profile_inputs(sorted(PROFILES)))
def test_mutated_profiles_are_refused_cleanly(ws: Workspace, text: str | bytes) -> None:
    _check_profile(ws, text)


# --- the slow part (still in the default run) ----------------------------------------------------

@pytest.mark.slow
@settings(max_examples=150, **COMMON)
@given(text=suite_inputs(_shipped_suite_trees()))
def test_mutated_shipped_suites_validate_cleanly(ws: Workspace, text: str | bytes) -> None:
    _check_suite(ws, text, run=False)


@pytest.mark.slow
@settings(max_examples=200, **COMMON)
@given(text=suite_inputs([GOOD, RICH, AUDIT], small=True))
def test_mutated_suites_run_cleanly(ws: Workspace, text: str | bytes) -> None:
    _check_suite(ws, text, run=True)


@pytest.mark.slow
@settings(max_examples=150, **COMMON)
@given(text=profile_inputs(sorted(PROFILES)))
def test_mutated_profiles_are_refused_cleanly_more(ws: Workspace, text: str | bytes) -> None:
    _check_profile(ws, text)


# --- regressions: what the mutations found (input -> exit 2, nothing written) -------------------

def _suite(change: Callable[[dict], object], base: dict = GOOD) -> str:
    tree = copy.deepcopy(base)
    change(tree)
    return _dump(tree)


def _exp(key: str, value: Any) -> Callable[[dict], object]:
    return lambda t: t["experiments"][0].update({key: value})


def _grid(key: str, value: Any) -> Callable[[dict], object]:
    return lambda t: t["experiments"][0]["grid"].update({key: value})


SUITE_REGRESSIONS = [
    # UnicodeDecodeError traceback (exit 1)
    pytest.param(b"\xff" + _dump(GOOD).encode(), "not UTF-8 text: byte 0xff at offset 0",
                 id="suite-not-utf8"),
    # ValueError / AttributeError / KeyError raised by yaml's constructors
    pytest.param(_dump(GOOD).replace("name: mutant", "name: !!float mutant"),
                 "malformed YAML: cannot read 'mutant' as tag:yaml.org,2002:float", id="tag-float"),
    pytest.param(_dump(GOOD).replace("root_seed: 1", "root_seed: !!timestamp 1"),
                 "cannot read '1' as tag:yaml.org,2002:timestamp", id="tag-timestamp"),
    pytest.param(_dump(GOOD).replace("seeds: 2", "seeds: !!bool maybe"),
                 "cannot read 'maybe' as tag:yaml.org,2002:bool", id="tag-bool"),
    # TypeError "keywords must be strings"
    pytest.param(_suite(lambda t: t["experiments"][0]["algorithms"][0].update(params={1: 2})),
                 "algorithms[0].params: parameter names must be strings, got 1; allowed: "
                 "solver_gap", id="params-int-key"),
    # OverflowError in Param.validate
    pytest.param(_suite(lambda t: t["experiments"][0]["algorithms"][0].update(
        params={"solver_gap": 10**400})),
        "parameter 'solver_gap' must be a number in [0.0, inf), got an integer of 401 digits",
        id="param-int-beyond-float"),
    # OverflowError comparing grid values
    pytest.param(_suite(_grid("n", 10**400)), "grid.n[0]: n must be an integer >= 2, got 1000",
                 id="grid-n-beyond-float"),
    # accepted; run: a zarr ValueError traceback (a uint64 coordinate)
    pytest.param(_suite(_grid("n", [2**63])), "allowed: integers from 2 to 1,000,000,000",
                 id="grid-n-beyond-int64"),
    # accepted; run: exit 1, every cell failed (ZeroDivisionError / OverflowError in the oracle)
    pytest.param(_suite(_grid("epsilon", [1e-300])), "grid.epsilon[0]: epsilon must be a finite "
                 "number > 0, got 1e-300; allowed: numbers from 1e-06 to 1e+06",
                 id="grid-epsilon-tiny"),
    pytest.param(_suite(_grid("epsilon", [1e300])), "allowed: numbers from 1e-06 to 1e+06",
                 id="grid-epsilon-huge"),
    # accepted: a store group / report file named "...\n"
    pytest.param(_suite(lambda t: t.update(name="mutant\n")),
                 "name: required identifier", id="name-trailing-newline"),
    pytest.param(_suite(_exp("name", "e\n")), "experiments[0].name: required identifier",
                 id="experiment-name-trailing-newline"),
    # the audit validator: OverflowError
    pytest.param(_suite(lambda t: t["audits"][0]["grid"].update(n=10**400), AUDIT),
                 "audits[0].grid.n[0]: n must be an integer >= 2", id="audit-grid-n-beyond-float"),
]


@pytest.mark.parametrize("text,fragment", SUITE_REGRESSIONS)
def test_suite_regressions(ws: Workspace, text: str | bytes, fragment: str) -> None:
    d = ws.new({"suite.yaml": text})
    assert ws.cli(d, "validate", "suite.yaml") == 2
    assert fragment in ws.err, ws.err
    for command in ("run", "audit"):
        assert ws.cli(d, command, "suite.yaml", "--store", str(d / "s.zarr"), "--backend",
                      "inline", "--quiet") == 2


def _profile(name: str, old: str, new: str) -> str:
    assert old in PROFILES[name], old
    return PROFILES[name].replace(old, new)


SLURM = "slurm-filled"
PROFILE_REGRESSIONS = [
    # UnicodeDecodeError traceback
    pytest.param(PROFILES["local"].encode() + b"\xfe\xff", "not UTF-8 text: byte 0xfe",
                 id="profile-not-utf8"),
    # RecursionError (the placeholder walk)
    pytest.param("cluster: {module: distributed, class: LocalCluster, kwargs: &k {x: [*k]}}\n",
                 "expands to more than 100000 values", id="profile-recursive-alias"),
    # AttributeError in dask.config.set (dpbench profile of a batch cluster)
    pytest.param(PROFILES[SLURM].replace("dask_config:\n", "dask_config:\n  0: null\n"),
                 "dask_config.0: must be a dotted dask config key", id="dask-config-int-key"),
    # RuntimeError "Cluster failed to start" (dpbench profile of a batch cluster; run --cluster
    # with any profile, after the store was created)
    pytest.param(_profile(SLURM, "worker-ttl: 10 minutes", "worker-ttl: false"),
                 "dask_config.distributed.scheduler.worker-ttl: must be a duration such as "
                 "'10 minutes' or a number of seconds >= 0 (or null), got False",
                 id="dask-config-ttl-bool"),
    pytest.param(_profile(SLURM, "worker-ttl: 10 minutes", "worker-ttl: []"),
                 "worker-ttl: must be a duration", id="dask-config-ttl-list"),
    pytest.param(_profile(SLURM, "worker-ttl: 10 minutes", "worker-ttl: -9223372036854775808"),
                 "worker-ttl: must be a duration", id="dask-config-ttl-negative"),
    pytest.param(_profile("local", "allowed-failures: 5", "allowed-failures: 5\n"
                          "  distributed.scheduler.worker-ttl: false"),
                 "worker-ttl: must be a duration", id="local-dask-config-ttl-bool"),
    # TypeError in dask-jobqueue's job script
    pytest.param(_profile(SLURM, "memory: 4GB", "memory: -9223372036854775808"),
                 "cluster.kwargs.memory: -9223372036854775808 is not a memory size of at least "
                 "1 MiB", id="memory-negative"),
    pytest.param(_profile(SLURM, "memory: 4GB", "memory: 1"),
                 "cluster.kwargs.memory: 1 is not a memory size", id="memory-one-byte"),
    # IndexError parsing the lifetime
    pytest.param(_profile(SLURM, '"50m"', '""'), "cluster.kwargs.worker_extra_args: "
                 "--lifetime/--lifetime-stagger value is not a duration", id="lifetime-empty"),
    # TypeError building the cluster
    pytest.param(_profile("slurm-local", "log_directory: logs", "log_directory: []"),
                 "cluster.kwargs.log_directory: must be a string (or null), got []",
                 id="log-directory-list"),
]


@pytest.mark.parametrize("text,fragment", PROFILE_REGRESSIONS)
def test_profile_regressions(ws: Workspace, text: str | bytes, fragment: str) -> None:
    d = ws.new({"profile.yaml": text, "suite.yaml": _dump(GOOD)})
    assert ws.cli(d, "profile", "profile.yaml") == 2
    assert fragment in ws.err, ws.err
    with pytest.MonkeyPatch.context() as mp:
        _forbid_clusters(mp)
        assert ws.cli(d, "run", "suite.yaml", "--store", str(d / "s.zarr"), "--cluster",
                      "profile.yaml", "--quiet") == 2
