"""Ctrl-C and SIGTERM at random moments of a store's growth (issue 33): every trial ends with exit
130 or 143, its interruption in the run log and no staging directory left, and resuming gives
the cube an undisturbed growth gives."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from dpbench.store.paths import ROOT_KEY, STAGING_SUFFIX
from tests.support.cubes import assert_cubes_identical

pytestmark = pytest.mark.slow

EPS = [round(0.1 * (i + 1), 3) for i in range(40)]
#: 800 000 cells (not applicable: output perturbation needs a strongly convex loss, LB-Lin is
#: linear, so nothing is computed): growing it by one ε value takes about a second here.
SUITE = """\
name: grow
root_seed: 5
seeds: 20000
experiments:
  - name: big
    problems: [{{problem: lb_lin}}]
    algorithms: [{{algorithm: output_perturbation}}]
    grid: {{n: [10], p: [2], epsilon: {eps}}}
"""
TRIALS = 20


def _sigint_default() -> None:
    """In the child: Ctrl-C as at a terminal (a test worker may run with SIGINT ignored, which a
    child inherits, and Python then leaves it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run(suite: Path, store: Path) -> list[str]:
    return [sys.executable, "-m", "dpbench", "run", str(suite), "--store", str(store),
            "--quiet"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    d = tmp_path_factory.mktemp("grow")
    (d / "a.yaml").write_text(SUITE.format(eps=EPS))
    (d / "b.yaml").write_text(SUITE.format(eps=[*EPS, 9.0]))
    subprocess.run(_run(d / "a.yaml", d / "base.zarr"), check=True, capture_output=True)
    shutil.copytree(d / "base.zarr", d / "reference.zarr")
    subprocess.run(_run(d / "b.yaml", d / "reference.zarr"), check=True, capture_output=True)
    return d / "b.yaml", d / "base.zarr", d / "reference.zarr"


def test_interrupted_growths_end_cleanly_and_resume_identical(
        setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    grown, base, reference = setup
    rng = np.random.default_rng(33)
    interrupted = 0
    for trial in range(TRIALS):
        store = tmp_path / f"t{trial}.zarr"
        shutil.copytree(base, store)
        staging = store.with_name(store.name + STAGING_SUFFIX)
        sig = (signal.SIGINT, signal.SIGTERM)[trial % 2]
        proc = subprocess.Popen(_run(grown, store), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                preexec_fn=_sigint_default)
        deadline = time.monotonic() + 30
        while not staging.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(float(rng.uniform(0.0, 0.8)))   # somewhere in the growth (or just after)
        if proc.poll() is None:
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode in (0, 130, 143), (trial, proc.returncode, err)
        assert "Traceback" not in err, (trial, err)
        assert not staging.exists(), f"trial {trial}: {staging.name} left behind"
        if proc.returncode:
            interrupted += 1
            assert proc.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[sig]
            runs = zarr.open_group(str(store), mode="r").attrs[ROOT_KEY]["runs"]
            assert runs[-1].get("interrupted"), f"trial {trial}: the run log misses it"
        subprocess.run(_run(grown, store), check=True, capture_output=True)
        assert_cubes_identical(reference, store, ["big"])
        shutil.rmtree(store)
    assert interrupted >= TRIALS * 3 // 4, f"only {interrupted} trials were interrupted"
