"""Cluster profiles: the shipped local profile runs a suite (same cube as inline); the SLURM/PBS
profiles render the right job scripts without submitting anything; bad profiles are clear errors
listing every problem with exit code 2 and nothing written; --scheduler-file runs a suite."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dpbench.cli.main import main
from dpbench.config.cluster import ProfileError, parse_walltime
from dpbench.config.suite import load_suite
from dpbench.core.errors import UserInputError
from dpbench.engine.backends.cluster_class import load_profile
from dpbench.engine.backends.render import render_profile
from dpbench.engine.runner import run_suite
from tests.support.cubes import assert_cubes_identical
from tests.support.failures import default_sigint

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_local_profile_is_valid() -> None:
    prof = load_profile(ROOT / "cluster" / "local.yaml")
    assert (prof.module, prof.cls) == ("distributed", "LocalCluster")
    assert prof.dask_config == {"distributed.scheduler.allowed-failures": 5}


@pytest.mark.slow
def test_run_through_the_local_profile(tiny_suite_file: Path, tmp_path: Path) -> None:
    store = tmp_path / "p.zarr"
    assert main(["run", str(tiny_suite_file), "--store", str(store), "--quiet",
                 "--cluster", str(ROOT / "cluster" / "local.yaml")]) == 0
    ref = tmp_path / "ref.zarr"
    run_suite(load_suite(tiny_suite_file), ref, workers=0, progress=False)
    assert_cubes_identical(ref, store, ["approx", "pure"])


@pytest.mark.parametrize("text,fragment", [
    ("cluster: {module: distributed, clas: LocalCluster}", "cluster.clas: unknown field"),
    ("clusters: {}", "a profile is a mapping with a 'cluster' field"),
    ("cluster: {module: no_such_module_xyz, class: X}",
     "cluster.module: 'no_such_module_xyz' is not a dask cluster module; allowed: "),
    ("cluster: {module: subprocess, class: Popen, kwargs: {args: 'touch PWNED', shell: true}}",
     "cluster.module: 'subprocess' is not a dask cluster module"),
    ("cluster: {module: distributed, class: Client}",
     "cluster.class: distributed.Client is not a dask cluster manager"),
    ("cluster: {module: distributed.utils, class: TimeoutError}", "is not a dask cluster manager"),
    ("cluster: {module: distributed, class: NoSuchCluster}", "cannot load distributed.NoSuchCluster"),
    ("cluster: [1, 2]", "cluster: must be a mapping"),
    ("cluster: {module: distributed, class: LocalCluster}\nscale: 3", "scale: must be a mapping"),
])
def test_bad_profiles(tmp_path: Path, tiny_suite_file: Path, text: str, fragment: str,
                      capsys: pytest.CaptureFixture[str]) -> None:
    prof = tmp_path / "bad.yaml"
    prof.write_text(text)
    store = tmp_path / "s.zarr"
    code = main(["run", str(tiny_suite_file), "--store", str(store), "--cluster", str(prof), "--quiet"])
    assert code == 2
    assert fragment in capsys.readouterr().err
    assert not store.exists()
    assert not (tmp_path / "PWNED").exists() and not Path("PWNED").exists()
    if "NoSuchCluster" not in text:
        with pytest.raises(UserInputError):
            load_profile(prof)
    assert main(["profile", str(prof)]) == 2


# --- shipped HPC / Kubernetes profiles ---------------------------------------------------------


def _seconds(duration: str) -> float:
    from dask.utils import parse_timedelta

    return parse_timedelta(duration, default="s")


@pytest.fixture
def no_batch_system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Fake sbatch/qsub/squeue/qstat on PATH that record any call: rendering must submit nothing."""
    bin_dir, log = tmp_path / "fakebin", tmp_path / "batch-calls.log"
    bin_dir.mkdir()
    for cmd in ("sbatch", "qsub", "squeue", "qstat", "scancel", "qdel"):
        f = bin_dir / cmd
        f.write_text(f"#!/bin/sh\necho {cmd} \"$@\" >> {log}\nexit 1\n")
        f.chmod(f.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def _filled(tmp_path: Path, name: str) -> Path:
    """A shipped template with its CHANGE-ME placeholders replaced, as a user would."""
    text = (ROOT / "cluster" / f"{name}.yaml").read_text()
    out = tmp_path / f"{name}.yaml"
    out.write_text(text.replace("CHANGE-ME-partition", "compute")
                   .replace("CHANGE-ME-queue", "workq").replace("CHANGE-ME-account", "proj42")
                   .replace("CHANGE-ME/dpbench", "registry.example.org/dpbench"))
    return out


@pytest.mark.parametrize("name,family", [("local", "generic"), ("slurm", "jobqueue"),
                                         ("pbs", "jobqueue"), ("kubernetes", "kubernetes")])
def test_shipped_profiles_are_valid_once_filled_in(name: str, family: str,
                                                   tmp_path: Path) -> None:
    if name != "local":  # the templates' placeholders are errors until replaced
        with pytest.raises(ProfileError, match="placeholder 'CHANGE-ME"):
            load_profile(ROOT / "cluster" / f"{name}.yaml")
    prof = load_profile(_filled(tmp_path, name))
    assert prof.family == family
    if family == "jobqueue":
        assert prof.adapt == {"minimum_jobs": 0, "maximum_jobs": 10, "wait_count": 10}
        assert prof.kwargs["processes"] == 1 and prof.kwargs["python"] == "python3"
        assert prof.kwargs["cores"] == prof.kwargs["processes"]


def _job_script(capsys: pytest.CaptureFixture[str], profile: Path) -> str:
    assert main(["profile", str(profile)]) == 0
    out = capsys.readouterr().out
    assert "nothing was submitted" in out
    return out.split("nothing was submitted):", 1)[1]


def _check_worker_command(script: str, walltime_s: float) -> None:
    worker = next(line for line in script.splitlines() if "dask_worker" in line)
    # one single-threaded worker per job (no churn), run by python3 on the job's PATH
    assert "--nthreads 1 " in worker and "--nworkers" not in worker
    assert worker.startswith("python3 -m distributed.cli.dask_worker")
    life = _seconds(re.search(r"--lifetime (\S+)", worker).group(1))
    stagger = _seconds(re.search(r"--lifetime-stagger (\S+)", worker).group(1))
    assert 0 < life + stagger < walltime_s


def test_slurm_job_script(capsys: pytest.CaptureFixture[str], no_batch_system: Path,
                          tmp_path: Path) -> None:
    pytest.importorskip("dask_jobqueue")
    script = _job_script(capsys, _filled(tmp_path, "slurm"))
    for directive in ("#SBATCH -t 01:00:00", "#SBATCH --cpus-per-task=1", "#SBATCH --mem=4G",
                      "#SBATCH -p compute", "#SBATCH -A proj42",
                      "#SBATCH --output=dpbench-worker-%j.out"):
        assert directive in script.splitlines(), directive
    assert "source ~/venvs/dpbench/bin/activate" in script
    _check_worker_command(script, 3600)
    assert not no_batch_system.exists(), no_batch_system.read_text()


def test_pbs_job_script(capsys: pytest.CaptureFixture[str], no_batch_system: Path,
                        tmp_path: Path) -> None:
    pytest.importorskip("dask_jobqueue")
    script = _job_script(capsys, _filled(tmp_path, "pbs"))
    for directive in ("#PBS -l walltime=01:00:00", "#PBS -l select=1:ncpus=1:mem=3815MB",
                      "#PBS -q workq", "#PBS -A proj42", "#PBS -j oe"):
        assert directive in script.splitlines(), directive
    _check_worker_command(script, 3600)
    assert not no_batch_system.exists(), no_batch_system.read_text()


def test_kubernetes_manifest(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("dask_kubernetes")
    import yaml

    assert main(["profile", str(_filled(tmp_path, "kubernetes"))]) == 0
    manifest = yaml.safe_load(capsys.readouterr().out.split("(nothing was created):", 1)[1])
    assert manifest["kind"] == "DaskCluster" and manifest["metadata"]["name"] == "dpbench"
    worker = manifest["spec"]["worker"]
    assert worker["replicas"] == 2
    container = worker["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "2Gi"}
    assert container["args"][:4] == ["dask", "worker", "--nthreads", "1"]


def test_local_profile_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", str(ROOT / "cluster" / "local.yaml")]) == 0
    assert "would start LocalCluster with 2 worker(s) x 1 thread(s)" in capsys.readouterr().out


BAD_SLURM = """
clustr: 1
cluster:
  module: dask_jobqueue
  class: SLURMCluster
  kwargs:
    cores: 4
    processes: 4
    memory: 4GB
    walltim: "01:00:00"
    walltime: "00:30:00"
    worker_extra_args: ["--lifetime", "28m", "--lifetime-stagger", "2m"]
adapt: {minimum_job: 0, maximum_jobs: 3}
dask_config: {distributed.scheduler.allowed-failure: 3}
"""


def test_bad_profile_lists_every_error(tmp_path: Path, tiny_suite_file: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("dask_jobqueue")
    prof = tmp_path / "bad.yaml"
    prof.write_text(BAD_SLURM)
    assert main(["profile", str(prof)]) == 2
    err = capsys.readouterr().err
    expected = [
        "clustr: unknown field (did you mean 'cluster'?); allowed: version, description, cluster",
        "cluster.kwargs.walltim: unknown keyword argument of SLURMCluster (did you mean "
        "'walltime'?); allowed: account,",
        "cluster.kwargs.worker_extra_args: worker --lifetime 1680 s + --lifetime-stagger 120 s "
        "must be shorter than walltime 00:30:00 (1800 s)",
        "adapt.minimum_job: unknown field (did you mean 'minimum_jobs'?); allowed: minimum_jobs, "
        "maximum_jobs",
        "dask_config.distributed.scheduler.allowed-failure: not a distributed config key (did you "
        "mean 'distributed.scheduler.allowed-failures'?)",
    ]
    assert "5 errors in the cluster profile" in err
    for fragment in expected:
        assert f"{prof}: {fragment}" in err, fragment
    store = tmp_path / "s.zarr"
    assert main(["run", str(tiny_suite_file), "--store", str(store), "--cluster", str(prof),
                 "--quiet"]) == 2
    assert not store.exists()
    with pytest.raises(ProfileError) as info:
        load_profile(prof)
    assert len(info.value.problems) == 5


@pytest.mark.parametrize("kwargs,adapt,fragment", [
    ("cores: 2\n    processes: 2\n    memory: 2GB\n    walltime: '00:30:00'", None,
     "cluster.kwargs.worker_extra_args: no worker --lifetime"),
    ("cores: 2\n    processes: 1\n    memory: 2GB\n    walltime: '1:00:00'\n"
     "    worker_extra_args: [--lifetime=50m]", None,
     "cluster.kwargs.processes: cores=2, processes=1 gives 2 thread(s) per worker"),
    ("cores: 2\n    processes: 2\n    memory: lots\n    walltime: '1:00:00'\n"
     "    worker_extra_args: [--lifetime=50m]", None, "cluster.kwargs.memory: 'lots' is not"),
    ("cores: 2\n    processes: 2\n    memory: 2GB\n    worker_extra_args: [--lifetime=50m]",
     None, "cluster.kwargs.walltime: required"),
    ("cores: 2\n    processes: 2\n    memory: 2GB\n    walltime: '1:00:00'\n"
     "    worker_extra_args: [--lifetime=50m]", "{maximum_jobs: 2, minimum_jobs: 3}",
     "adapt.minimum_jobs: 3 is larger than adapt.maximum_jobs = 2"),
    ("cores: 2\n    processes: 2\n    memory: 2GB\n    walltime: '1:00:00'\n"
     "    worker_extra_args: [--lifetime=50m]", "{jobs: 2}",
     "adapt.jobs: unknown field"),
    ("cores: 2\n    processes: 2\n    memory: 2GB\n    walltime: '1:00:00'\n"
     "    worker_extra_args: [--lifetime, 50 parsecs]", None,
     "--lifetime/--lifetime-stagger value is not a duration"),
])
def test_bad_jobqueue_profiles(tmp_path: Path, kwargs: str, adapt: str | None,
                               fragment: str) -> None:
    text = f"cluster:\n  module: dask_jobqueue\n  class: PBSCluster\n  kwargs:\n    {kwargs}\n"
    if adapt:
        text += f"adapt: {adapt}\n"
    prof = tmp_path / "pbs.yaml"
    prof.write_text(text)
    with pytest.raises(ProfileError) as info:
        load_profile(prof)
    assert fragment in str(info.value)


@pytest.mark.parametrize("text,fragment", [
    ("cluster: {module: distributed, class: LocalCluster, kwargs: {n_worker: 2}}",
     "cluster.kwargs.n_worker: unknown keyword argument of LocalCluster (did you mean "
     "'n_workers'?)"),
    ("cluster: {module: distributed, class: LocalCluster}\nscale: {jobs: 2}",
     "scale.jobs: unknown field; allowed: n, memory, cores"),
    ("cluster: {module: distributed, class: LocalCluster}\nscale: {n: 2}\nadapt: {maximum: 3}",
     "scale: give scale (a fixed size) or adapt (adaptive), not both"),
    ("cluster: {module: distributed, class: LocalCluster}\nversion: 2",
     "version: unsupported version 2; allowed: 1"),
    ("cluster: {module: dask_kubernetes.operator, class: KubeCluster, kwargs: {name: x, "
     "n_workers: -1, resources: {limit: {}}}}",
     "cluster.kwargs.image: required string"),
    ("cluster: {module: dask_kubernetes.operator, class: KubeCluster, kwargs: {name: x, "
     "image: i, resources: {limit: {}}}}",
     "cluster.kwargs.resources.limit: unknown field (did you mean 'limits'?)"),
])
def test_bad_profile_fields(tmp_path: Path, text: str, fragment: str) -> None:
    prof = tmp_path / "p.yaml"
    prof.write_text(text)
    with pytest.raises(ProfileError) as info:
        load_profile(prof)
    assert fragment in str(info.value)


@pytest.mark.parametrize("text,unit,seconds", [
    ("01:00:00", "minutes", 3600), ("1-02:00:00", "minutes", 93600), ("30", "minutes", 1800),
    ("30", "seconds", 30), ("05:30", "minutes", 330), ("2-12", "minutes", 216000),
])
def test_parse_walltime(text: str, unit: str, seconds: float) -> None:
    assert parse_walltime(text, unit) == seconds


def test_parse_walltime_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="not a walltime"):
        parse_walltime("1h")


def test_render_without_the_optional_package(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A Kubernetes profile is still validated (structurally) where dask-kubernetes is absent."""
    import dpbench.engine.backends.cluster_class as cluster_class_mod
    import dpbench.engine.backends.render as render_mod

    for mod in (cluster_class_mod, render_mod):
        monkeypatch.setattr(mod, "import_class", lambda module, cls: None)
    out = render_profile(_filled(tmp_path, "kubernetes"))
    assert "not rendered" in out and "dp-ratebench[kubernetes]" in out


# --- --scheduler-file --------------------------------------------------------------------------

@pytest.mark.parametrize("content,extra,fragment", [
    (None, [], "no such file"),
    ("{not json", [], "malformed JSON"),
    ('{"id": "x"}', [], "a JSON object with an 'address' field"),
    ('{"address": "tcp://127.0.0.1:1"}', ["--scheduler", "tcp://127.0.0.1:1"],
     "give --scheduler ADDRESS or --scheduler-file FILE, not both"),
])
def test_bad_scheduler_file(tmp_path: Path, tiny_suite_file: Path, content: str | None,
                            extra: list[str], fragment: str,
                            capsys: pytest.CaptureFixture[str]) -> None:
    sched = tmp_path / "scheduler.json"
    if content is not None:
        sched.write_text(content)
    store = tmp_path / "s.zarr"
    assert main(["run", str(tiny_suite_file), "--store", str(store), "--quiet",
                 "--scheduler-file", str(sched), *extra]) == 2
    assert fragment in capsys.readouterr().err
    assert not store.exists()


@pytest.mark.slow
def test_run_through_a_scheduler_file(tiny_suite_file: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    from distributed import LocalCluster

    sched = tmp_path / "scheduler.json"
    # The scheduler file wins over DASK_SCHEDULER_ADDRESS (which points nowhere here).
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:9")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      scheduler_kwargs={"scheduler_file": str(sched)}) as cluster:
        assert sched.exists()
        store = tmp_path / "f.zarr"
        assert main(["run", str(tiny_suite_file), "--store", str(store), "--quiet",
                     "--scheduler-file", str(sched)]) == 0
        assert f"backend: scheduler {cluster.scheduler_address} (from {sched})" \
            in capsys.readouterr().out
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS")
    ref = tmp_path / "ref.zarr"
    run_suite(load_suite(tiny_suite_file), ref, workers=0, progress=False)
    assert_cubes_identical(ref, store, ["approx", "pure"])


def test_loading_a_jobqueue_class_keeps_ctrl_c_an_interrupt() -> None:
    """dask-jobqueue installs, on import, a SIGINT handler that calls sys.exit() (exit code 0 for
    an interrupted sweep); the profile loader imports it without letting that handler in."""
    pytest.importorskip("dask_jobqueue")
    code = ("import signal, sys; assert 'dask_jobqueue' not in sys.modules\n"
            "from dpbench.engine.backends.cluster_class import cluster_class, load_profile\n"
            f"cluster_class(load_profile({str(ROOT / 'cluster' / 'slurm-local.yaml')!r}), 'p')\n"
            "assert 'dask_jobqueue' in sys.modules\n"
            "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n")
    # A child inherits an ignored SIGINT (a shell's background job): start it with the default.
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       preexec_fn=default_sigint)
    assert r.returncode == 0, r.stderr[-2000:]


def test_a_cluster_without_workers_ends_the_run_after_worker_timeout_s(
        tiny_suite_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cluster that never gets a worker (here a LocalCluster of 0 workers; on a batch system a
    job that never starts) ends the run with exit 2 after the profile's worker_timeout_s, the
    interruption recorded and the lock released, instead of waiting for ever."""
    import json
    import time

    from dpbench.store.cube import ROOT_KEY

    prof = tmp_path / "empty.yaml"
    prof.write_text("cluster:\n  module: distributed\n  class: LocalCluster\n"
                    "  kwargs: {n_workers: 0, dashboard_address: null}\nworker_timeout_s: 4\n")
    store = tmp_path / "s.zarr"
    t0 = time.time()
    code = main(["run", str(tiny_suite_file), "--store", str(store), "--cluster", str(prof),
                 "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "no worker after" in err and "worker_timeout_s = 4 s" in err, err
    assert time.time() - t0 < 60
    runs = json.loads((store / "zarr.json").read_text())["attributes"][ROOT_KEY]["runs"]
    assert "NoWorkers" in runs[-1]["interrupted"]
    assert not Path(f"{store}.lock").exists()


def test_the_multinode_profile_is_slurm_yaml_filled_in_for_the_namespace_cluster(
        tmp_path: Path) -> None:
    """cluster/slurm-multinode.yaml (scripts/cluster-local.sh) validates offline and differs from
    cluster/slurm.yaml only in what a user fills in for a site (docs/clusters.md, 'Multi-node')."""
    shipped = load_profile(_filled(tmp_path, "slurm"))
    multi = load_profile(ROOT / "cluster" / "slurm-multinode.yaml")
    site = {"queue", "account", "memory", "job_extra_directives", "job_script_prologue", "python",
            "interface"}
    assert {k: v for k, v in multi.kwargs.items() if k not in site} == \
        {k: v for k, v in shipped.kwargs.items() if k not in site}
    assert multi.kwargs["queue"] == "multi" and multi.kwargs["interface"] == "dpb0"
    assert "account" not in multi.kwargs
    assert multi.dask_config == shipped.dask_config
    assert multi.adapt == {**shipped.adapt, "maximum_jobs": 3}

