"""A cell that kills its process fails alone, by default (no cell_timeout_s or cell_memory_mb in
the suite): the cells packed into the same task, the worker and an inline dpbench process all
survive (docs/reliability.md, 'Crash containment').

The fault plugin (tests/support/failures.py) sends itself SIGSEGV at n = 60 on LB-Lin, as a
crashing compiled extension would; it declares a small cost, so its chunks are packed into the
same tasks as good ones.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpbench.core.schema import DONE, FAILED
from tests.support import failures as tf

pytestmark = pytest.mark.slow

SUITE = f"""\
name: segv
root_seed: 3
seeds: 2
experiments:
  - name: e
    problems: [{{problem: lb_lin}}, {{problem: lb_quad}}]
    algorithms:
      - {{label: ref, algorithm: nonprivate_erm}}
      - {{label: fault, algorithm: fault_injector, params: {{cheap: true}}}}
    grid: {{n: [40, {tf.FAULT_N}, 80], p: [3], epsilon: [1.0], delta: [1e-5]}}
"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_segfaulting_cell_fails_alone(tmp_path: Path, workers: str) -> None:
    suite = tmp_path / "segv.yaml"
    suite.write_text(SUITE)
    store = tmp_path / "s.zarr"
    runner = ("import sys; sys.path.insert(0, %r); from tests.support import failures as tf; "
              "tf.register(); from dpbench.cli.main import main; sys.exit(main(sys.argv[1:]))"
              % str(Path(__file__).resolve().parents[2]))
    env = {**tf.child_env(), tf.FAULT_ENV: f"segfault@{tf.FAULT_N}"}
    r = subprocess.run([sys.executable, "-c", runner, "run", str(suite), "--store", str(store),
                        "--workers", workers, "--quiet"], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 1, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])  # failed cells
    ds = tf._open(store)
    status = ds.status
    crashed = status.sel(algorithm="fault", problem="lb_lin", n=tf.FAULT_N)
    assert np.all(crashed.values == FAILED)
    errors = " ".join(map(str, ds.error.sel(algorithm="fault", problem="lb_lin",
                                            n=tf.FAULT_N).values.ravel()))
    assert "SIGSEGV" in errors, errors
    others = status.where(~((status.algorithm == "fault") & (status.problem == "lb_lin")
                            & (status.n == tf.FAULT_N)), DONE)
    assert np.all(others.values == DONE), "a cell packed with the crashing one was lost"
