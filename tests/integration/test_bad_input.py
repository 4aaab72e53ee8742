"""Every kind of bad input: exit 2, a message naming the field, and nothing created or changed.

:data:`BAD_INPUTS` is the table of docs/reliability.md ('Bad input'): each row is a kind of bad
input, the command it is given to, and a fragment of the message. The test runs each command
through the CLI's ``main`` (the code of ``dpbench``), checks the exit code and the message, and
compares a listing of the working directory (names, sizes, modification times) before and after:
a refused command writes nothing. ``test_the_reliability_table_lists_every_row`` keeps the doc's
table and this one equal.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from dpbench.cli.main import main
from dpbench.store.lock import StoreLock

ROOT = Path(__file__).resolve().parents[2]

GOOD = {
    "name": "bad_input",
    "root_seed": 1,
    "seeds": 2,
    "experiments": [{
        "name": "e",
        "problems": [{"problem": "lb_quad"}],
        "algorithms": [{"algorithm": "output_perturbation"}],
        "grid": {"n": [10, 20], "p": [2], "epsilon": [1.0]},
    }],
}
AUDIT = {
    "name": "bad_audit", "root_seed": 1,
    "audit": {"runs": 200, "selection_runs": 200},
    "audits": [{"name": "a", "algorithms": [{"algorithm": "output_perturbation"}],
                "problems": [{"problem": "lb_quad"}], "canaries": ["sphere"],
                "grid": {"n": [10], "p": [2], "epsilon": [1.0], "delta": [0.0]}}],
}


def _exp(**kw: object) -> dict:
    suite = json.loads(json.dumps(GOOD))
    suite["experiments"][0].update(kw)
    return suite


def _grid(**kw: object) -> dict:
    suite = json.loads(json.dumps(GOOD))
    suite["experiments"][0]["grid"].update(kw)
    return suite


def _top(**kw: object) -> dict:
    return {**json.loads(json.dumps(GOOD)), **kw}


def _audit(**kw: object) -> dict:
    suite = json.loads(json.dumps(AUDIT))
    suite["audits"][0].update(kw)
    return suite


@dataclass(frozen=True)
class Bad:
    """One kind of bad input: ``suite`` (a mapping, or raw text) given to ``command`` with
    ``args`` (``{store}``, ``{suite}``, ``{dir}`` substituted); ``setup`` prepares the directory."""

    id: str
    what: str
    fragment: str
    suite: dict | str | None = None
    command: str = "run"
    args: tuple[str, ...] = ()
    setup: Callable[[Path], None] | None = None


def _profile(text: str) -> Callable[[Path], None]:
    return lambda d: (d / "profile.yaml").write_text(text)


def _no_sbatch_on_path(d: Path) -> None:
    """PATH without any directory holding sbatch (restored by the test's monkeypatch)."""
    import shutil

    keep = [p for p in os.environ["PATH"].split(os.pathsep)
            if p and not (Path(p) / "sbatch").exists()]
    os.environ["PATH"] = os.pathsep.join(keep)
    assert shutil.which("sbatch") is None


def _locked(d: Path) -> None:
    lock = StoreLock(d / "s.zarr", "dpbench run other")
    lock.acquire()
    lock._stop.set()  # keep the file, stop the heartbeat thread (the holder is this live process)


def _garbage_server(d: Path) -> None:
    """A TCP server that answers every connection with bytes that are not dask's protocol."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.sendall(b"\xff" * 64)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    (d / "port").write_text(str(srv.getsockname()[1]))


def _free_port(d: Path) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    (d / "port").write_text(str(s.getsockname()[1]))
    s.close()


def _bad_card_plugin(d: Path) -> None:
    """Register a mechanism whose rate card expression is outside the grammar."""
    from typing import ClassVar

    from dpbench.algorithms.output_perturbation import OutputPerturbation
    from dpbench.core.ratecard import RateCard
    from dpbench.core.registry import register

    class BadCard(OutputPerturbation):
        name: ClassVar[str] = "bad_card_mechanism"

        def rate_card(self) -> RateCard:
            return RateCard(expression="n.__class__", exponents={}, citation="")

    register("algorithms", BadCard)


def _store_of(suite: dict) -> Callable[[Path], None]:
    """A store of ``suite`` at ``s.zarr``, run to the end."""
    def make(d: Path) -> None:
        (d / "first.yaml").write_text(yaml.safe_dump(suite))
        assert main(["run", str(d / "first.yaml"), "--store", str(d / "s.zarr"), "--workers",
                     "0", "--quiet"]) == 0
    return make


def _other_store(d: Path) -> None:
    other = json.loads(json.dumps(GOOD))
    other["root_seed"] = 2
    (d / "other.yaml").write_text(yaml.safe_dump(other))
    assert main(["run", str(d / "other.yaml"), "--store", str(d / "s.zarr"), "--workers", "0",
                 "--quiet"]) == 0


def _real(params: dict, grid: dict | None = None, problem: str = "real_logistic") -> dict:
    """A suite whose problem is a dataset-backed one (docs/datasets.md)."""
    return _exp(problems=[{"problem": problem, "params": params}],
                algorithms=[{"algorithm": "nonprivate_erm"}],
                grid=grid or {"n": [10, 20], "p": [2], "epsilon": [1.0]})


def _data(name: str, text: str) -> Callable[[Path], None]:
    """Write a data file next to the suite (relative paths are resolved against its directory)."""
    return lambda d: (d / name).write_text(text)


def _npz(d: Path) -> None:
    import numpy as np

    np.savez(d / "d.npz", features=np.zeros((6, 2)), y=np.arange(6) % 2)


_CSV = "a,b,label\n" + "".join(f"{i % 3}.5,{i}.25,{i % 2}\n" for i in range(12))

BAD_INPUTS: tuple[Bad, ...] = (
    # --- the suite file ------------------------------------------------------------------------
    Bad("suite-missing", "suite file does not exist", "cannot read", None),
    Bad("suite-malformed-yaml", "malformed YAML", "YAML", "name: [unclosed"),
    Bad("suite-not-mapping", "suite is not a mapping", "must be a YAML mapping", "- 1\n- 2\n"),
    Bad("suite-yaml-bomb", "nested YAML aliases (billion laughs)", "alias",
        "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nname: [*e, *e, *e, *e, *e, *e, *e, *e]\n"),
    Bad("name-missing", "no suite name", "name: required identifier",
        {k: v for k, v in GOOD.items() if k != "name"}),
    Bad("name-path", "suite name with a path separator", "name: required identifier",
        _top(name="../escape")),
    Bad("name-reserved", "suite name zarr.json", "'zarr.json' is reserved", _top(name="zarr.json")),
    Bad("top-unknown-key", "unknown top-level field", "unknown field", _top(experimentz=[])),
    Bad("root-seed-negative", "negative root_seed", "root_seed: must be an integer >= 0",
        _top(root_seed=-1)),
    Bad("seeds-zero", "seeds = 0", "seeds: must be an integer >= 1", _top(seeds=0)),
    Bad("timeout-huge", "cell_timeout_s = 1e300", "cell_timeout_s: must be a number of seconds",
        _top(cell_timeout_s=1e300)),
    Bad("timeout-negative", "cell_timeout_s < 0", "cell_timeout_s", _top(cell_timeout_s=-5)),
    Bad("memory-zero", "cell_memory_mb = 0", "cell_memory_mb", _top(cell_memory_mb=0)),
    Bad("seeds-huge", "seeds: 10⁹ (a typo: 4·10⁹ cells)", "more than max_cells",
        _top(seeds=10**9)),
    Bad("max-cells-invalid", "max_cells: 0", "max_cells: must be an integer",
        _top(max_cells=0)),
    Bad("experiments-missing", "no experiments", "experiments: required",
        {k: v for k, v in GOOD.items() if k != "experiments"}),
    Bad("experiment-name-reserved", "experiment named audit (the audit group)",
        "'audit' is reserved", _exp(name="audit")),
    Bad("experiment-name-json", "experiment named x.json", "is reserved", _exp(name="x.json")),
    Bad("experiment-name-device", "experiment named NUL", "is reserved", _exp(name="NUL")),
    Bad("experiment-duplicate", "two experiments with one name", "duplicate experiment name",
        {**GOOD, "experiments": GOOD["experiments"] * 2}),
    Bad("problem-unknown", "unknown problem", "lb_quadd",
        _exp(problems=[{"problem": "lb_quadd"}])),
    Bad("algorithm-unknown", "unknown algorithm", "output_perturbaton",
        _exp(algorithms=[{"algorithm": "output_perturbaton"}])),
    Bad("algorithm-param", "algorithm parameter of the wrong type", "solver_gap",
        _exp(algorithms=[{"algorithm": "output_perturbation", "params": {"solver_gap": "x"}}])),
    Bad("grid-n-one", "n = 1", "n must be an integer >= 2", _grid(n=[1])),
    Bad("grid-p-zero", "p = 0", "p must be an integer >= 1", _grid(p=[0])),
    Bad("grid-epsilon-negative", "ε < 0", "epsilon must be a finite number > 0",
        _grid(epsilon=[-1.0])),
    Bad("grid-epsilon-inf", "ε = ∞", "epsilon must be a finite number > 0",
        _grid(epsilon=[float("inf")])),
    Bad("grid-delta-one", "δ = 1", "delta must be a number in [0, 1)", _grid(delta=[1.0])),
    Bad("grid-duplicate", "ε: [1, 1.0]", "duplicate values", _grid(epsilon=[1, 1.0])),
    Bad("grid-empty", "an empty axis", "empty grid", _grid(n=[])),
    Bad("grid-unknown-axis", "an axis no plugin declares", "unknown axis", _grid(lr=[0.1])),
    Bad("approx-at-delta-zero", "an (ε, δ) mechanism at δ = 0", "grid.delta contains 0",
        _exp(algorithms=[{"algorithm": "noisy_sgd"}],
             grid={"n": [10, 20], "p": [2], "epsilon": [1.0], "delta": [0.0]})),
    Bad("plugin-bad-rate-card", "a plugin whose rate card is outside the grammar",
        "bad_card_mechanism.rate_card() fails",
        _exp(algorithms=[{"algorithm": "bad_card_mechanism"}]), setup=_bad_card_plugin),
    # --- dataset-backed problems ------------------------------------------------------------------
    Bad("dataset-name", "a data set name without a known kind", "is not a data set name",
        _real({"dataset": "xls:d.xls"})),
    Bad("dataset-missing-file", "a data file that does not exist", "cannot read",
        _real({"dataset": "csv:nope.csv"})),
    Bad("dataset-sklearn-unknown", "an unknown scikit-learn data set", "breast_cancer",
        _real({"dataset": "sklearn:breast_cancr"})),
    Bad("dataset-label-column", "a CSV label column that does not exist", "no column named",
        _real({"dataset": "csv:d.csv", "label_column": "target"}), setup=_data("d.csv", _CSV)),
    Bad("dataset-not-numeric", "a CSV feature cell that is not a number", "not a number",
        _real({"dataset": "csv:d.csv"}), setup=_data("d.csv", _CSV + "x,1,0\n")),
    Bad("dataset-nan-row", "a CSV row with a missing value", "missing or non-finite",
        _real({"dataset": "csv:d.csv"}), setup=_data("d.csv", _CSV + "1,,0\n")),
    Bad("dataset-ragged", "a CSV row with too few fields", "fields",
        _real({"dataset": "csv:d.csv"}), setup=_data("d.csv", _CSV + "1,0\n")),
    Bad("dataset-one-class", "labels of a single class", "single class",
        _real({"dataset": "csv:d.csv"}),
        setup=_data("d.csv", "a,b,label\n" + "1,2,1\n3,4,1\n5,6,1\n7,8,1\n")),
    Bad("dataset-multiclass", "three classes without positive", "name the positive class",
        _real({"dataset": "sklearn:iris"}, {"n": [10], "p": [4], "epsilon": [1.0]})),
    Bad("dataset-npz-array", "an NPZ archive without the features array", "has no array 'X'",
        _real({"dataset": "npz:d.npz"}), setup=_npz),
    Bad("dataset-svmlight", "an svmlight line that is not index:value", "not index:value",
        _real({"dataset": "svmlight:d.txt"}), setup=_data("d.txt", "1 1:0.5 2:1\n-1 1-0.5\n")),
    Bad("dataset-sha256", "a pinned digest the data do not have", "not the pinned",
        _real({"dataset": "csv:d.csv", "sha256": "0" * 64}), setup=_data("d.csv", _CSV)),
    Bad("dataset-grid-p", "grid p other than the data's dimension", "p must be [2]",
        _real({"dataset": "csv:d.csv"}, {"n": [5], "p": [3], "epsilon": [1.0]}),
        setup=_data("d.csv", _CSV)),
    Bad("dataset-grid-n", "grid n above the training pool", "n must be at most 8",
        _real({"dataset": "csv:d.csv"}, {"n": [5, 9], "p": [2], "epsilon": [1.0]}),
        setup=_data("d.csv", _CSV)),
    # --- options --------------------------------------------------------------------------------
    Bad("workers-negative", "--workers -1", "--workers must be >= 0", GOOD,
        args=("--workers", "-1")),
    Bad("backend-unknown", "--backend nope", "invalid choice", GOOD, args=("--backend", "nope")),
    Bad("scheduler-malformed", "--scheduler without a port", "not a dask scheduler address",
        GOOD, args=("--scheduler", "not an address")),
    Bad("scheduler-scheme", "--scheduler with an unknown scheme", "unknown address scheme",
        GOOD, args=("--scheduler", "nonsense://x")),
    Bad("scheduler-refused", "--scheduler nobody listens on", "cannot reach the scheduler",
        GOOD, args=("--scheduler", "tcp://127.0.0.1:{port}"), setup=_free_port),
    Bad("scheduler-not-dask", "--scheduler that does not speak dask",
        "does not answer as a dask scheduler", GOOD,
        args=("--scheduler", "tcp://127.0.0.1:{port}"), setup=_garbage_server),
    Bad("scheduler-both", "--scheduler and --scheduler-file", "not both", GOOD,
        args=("--scheduler", "tcp://127.0.0.1:1", "--scheduler-file", "{dir}/s.json")),
    Bad("scheduler-file-missing", "--scheduler-file that does not exist", "no such file", GOOD,
        args=("--scheduler-file", "{dir}/nope.json")),
    Bad("scheduler-file-malformed", "--scheduler-file that is not JSON", "malformed JSON", GOOD,
        args=("--scheduler-file", "{dir}/s.json"),
        setup=lambda d: (d / "s.json").write_text("{not json")),
    Bad("profile-missing", "--cluster file that does not exist", "cannot read", GOOD,
        args=("--cluster", "{dir}/nope.yaml")),
    Bad("profile-code", "--cluster naming subprocess.Popen",
        "'subprocess' is not a dask cluster module", GOOD, args=("--cluster", "{dir}/profile.yaml"),
        setup=_profile("cluster: {module: subprocess, class: Popen, kwargs: {args: 'touch X', "
                       "shell: true}}")),
    Bad("profile-placeholder", "--cluster with a CHANGE-ME placeholder", "placeholder", GOOD,
        args=("--cluster", "{dir}/profile.yaml"),
        setup=_profile("cluster: {module: dask_jobqueue, class: SLURMCluster, kwargs: {cores: 1,"
                       " processes: 1, memory: 1GB, queue: CHANGE-ME-partition, walltime: "
                       "'01:00:00', worker_extra_args: [--lifetime, 50m, --lifetime-stagger, "
                       "4m]}}")),
    Bad("profile-interface", "--cluster SLURM profile naming an interface this machine lacks",
        "is not a network interface of this machine", GOOD,
        args=("--cluster", "{dir}/profile.yaml"),
        setup=_profile("cluster: {module: dask_jobqueue, class: SLURMCluster, kwargs: {cores: 1,"
                       " processes: 1, memory: 1GB, queue: q, interface: nosuch0, walltime: "
                       "'01:00:00', worker_extra_args: [--lifetime, 50m, --lifetime-stagger, "
                       "4m]}}")),
    Bad("profile-loopback", "--cluster SLURM profile whose scheduler listens on 127.0.0.1",
        "which worker jobs on other nodes cannot connect to", GOOD,
        args=("--cluster", "{dir}/profile.yaml"),
        setup=_profile("cluster: {module: dask_jobqueue, class: SLURMCluster, kwargs: {cores: 1,"
                       " processes: 1, memory: 1GB, queue: no-such-partition, walltime: "
                       "'01:00:00', scheduler_options: {host: 127.0.0.1}, worker_extra_args: "
                       "[--lifetime, 50m, --lifetime-stagger, 4m]}}")),
    Bad("profile-no-sbatch", "--cluster SLURM profile on a machine without sbatch",
        "which is not on this machine's PATH", GOOD, args=("--cluster", "{dir}/profile.yaml"),
        setup=lambda d: (_profile(
            "cluster: {module: dask_jobqueue, class: SLURMCluster, kwargs: {cores: 1, "
            "processes: 1, memory: 1GB, queue: q, walltime: '01:00:00', worker_extra_args: "
            "[--lifetime, 50m, --lifetime-stagger, 4m]}}")(d), _no_sbatch_on_path(d))),
    Bad("profile-worker-timeout", "--cluster with worker_timeout_s: 0",
        "worker_timeout_s: must be a number of seconds", GOOD,
        args=("--cluster", "{dir}/profile.yaml"),
        setup=_profile("cluster: {module: distributed, class: LocalCluster, kwargs: "
                       "{n_workers: 1}}\nworker_timeout_s: 0\n")),
    # --- the store ------------------------------------------------------------------------------
    Bad("store-is-file", "--store names a file", "is a file", GOOD,
        setup=lambda d: (d / "s.zarr").write_text("x")),
    Bad("store-foreign-dir", "--store names a non-empty directory that is not a store",
        "holds something else", GOOD,
        setup=lambda d: ((d / "s.zarr").mkdir(), (d / "s.zarr" / "f").write_text("x"))),
    Bad("store-locked", "--store being written by another live command",
        "being written by dpbench run other", GOOD, setup=_locked),
    Bad("store-other-suite", "--store created for another definition", "different definition",
        GOOD, setup=_other_store),
    Bad("store-fewer-seeds", "--store holding more seeds than the suite (growing only adds)",
        "seeds decreased", dict(GOOD, seeds=1), setup=_store_of(GOOD)),
    # --- selections -----------------------------------------------------------------------------
    Bad("only-unknown-value", "--only naming no algorithm of the suite", "no such algorithm",
        GOOD, args=("--only", "algorithm=nope")),
    Bad("only-bad-key", "--only with a key that is not experiment, algorithm or problem",
        "KEY one of experiment, algorithm, problem", GOOD, args=("--only", "seed=1")),
    # --- audits -----------------------------------------------------------------------------------
    Bad("audit-runs-negative", "audit runs below 2", "must be an integer >= 2",
        _audit(runs=1), command="audit"),
    Bad("audit-budget", "audit budget_s not positive", "budget_s",
        _audit(budget_s=0), command="audit"),
    Bad("audit-canary-unknown", "unknown canary", "unknown kind 'spher'",
        _audit(canaries=["spher"]), command="audit"),
    Bad("audit-expect", "expect: maybe", "expect", _audit(expect="maybe"), command="audit"),
    Bad("audit-none", "dpbench audit on a suite without audits", "has no audits", GOOD,
        command="audit"),
    # --- report -----------------------------------------------------------------------------------
    Bad("report-not-store", "report of a directory that is not a store", "not a dpbench store",
        None, command="report", setup=lambda d: (d / "s.zarr").mkdir()),
    Bad("report-foreign-output", "report --output onto a file dpbench did not write",
        "was not written by dpbench", GOOD, command="report",
        args=("--output", "{dir}/notes.html"), setup=lambda d: (
            (d / "notes.html").write_text("mine"),
            main(["run", str(d / "suite.yaml"), "--store", str(d / "s.zarr"), "--workers", "0",
                  "--quiet"]))),
)


def _listing(d: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for p in sorted(d.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(d))] = (st.st_size if p.is_file() else -1, st.st_mtime_ns)
    return out


@pytest.mark.parametrize("bad", BAD_INPUTS, ids=[b.id for b in BAD_INPUTS])
def test_bad_input_exits_2_and_writes_nothing(bad: Bad, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", os.environ["PATH"])  # restored after setups that change it
    d = tmp_path / "w"
    d.mkdir()
    suite = d / "suite.yaml"
    if isinstance(bad.suite, dict):
        suite.write_text(yaml.safe_dump(bad.suite))
    elif isinstance(bad.suite, str):
        suite.write_text(bad.suite)
    if bad.setup is not None:
        bad.setup(d)
    capsys.readouterr()
    port = (d / "port").read_text() if (d / "port").exists() else ""
    args = [a.format(dir=d, port=port) for a in bad.args]
    before = _listing(d)
    cwd = Path.cwd()
    os.chdir(d)
    try:
        if bad.command == "report":
            argv = ["report", str(d / "s.zarr"), *args]
        else:
            argv = [bad.command, str(suite), "--store", str(d / "s.zarr"), "--workers", "0",
                    "--quiet", *args]
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse
            code = exc.code
    finally:
        os.chdir(cwd)
    from dpbench.core.registry import available

    available("algorithms").pop("bad_card_mechanism", None)  # registered by one setup only
    err = capsys.readouterr().err
    assert code == 2, (code, err)
    assert bad.fragment in err, err
    assert "Traceback" not in err
    assert _listing(d) == before, "a refused command changed the directory"
    assert not (d / "X").exists()


def test_the_reliability_table_lists_every_row() -> None:
    doc = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Bad input"):]
    section = section[:section.index("\n## ", 5)]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    ids = [line.split("`")[1] for line in rows]
    assert ids == [b.id for b in BAD_INPUTS], "docs/reliability.md's table differs from BAD_INPUTS"
    assert len(BAD_INPUTS) >= 40
