"""A reader in a long-lived process while runs grow the store (issue 33): every read sees the old
or the new experiment whole, or says the store changed under it; never a traceback from a read
that mixed the two (``cannot reshape array of size …``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dpbench.analysis.export import store_frame
from dpbench.core.errors import StoreError
from dpbench.report.diff import diff_stores
from dpbench.store.cube import Store

pytestmark = pytest.mark.slow

SEEDS = 400
SUITE = """\
name: race
root_seed: 9
seeds: {seeds}
experiments:
  - name: big
    problems: [{{problem: lb_quad}}]
    algorithms: [{{algorithm: output_perturbation}}]
    grid: {{n: [10], p: [2], epsilon: {eps}}}
"""
CYCLES = 20


def test_reads_during_twenty_growths_are_whole_or_refused(tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    eps = [round(0.1 * (i + 1), 3) for i in range(20)]
    first = tmp_path / "s0.yaml"
    first.write_text(SUITE.format(seeds=SEEDS, eps=eps))
    subprocess.run([sys.executable, "-m", "dpbench", "run", str(first), "--store", str(store),
                    "--quiet"], check=True, capture_output=True)
    whole = refused = 0
    for cycle in range(CYCLES):
        eps = [*eps, 10.0 + cycle]
        suite = tmp_path / f"s{cycle + 1}.yaml"
        suite.write_text(SUITE.format(seeds=SEEDS, eps=eps))
        grow = subprocess.Popen([sys.executable, "-m", "dpbench", "run", str(suite), "--store",
                                 str(store), "--quiet"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        while grow.poll() is None:
            try:
                frame = store_frame(Store.open(store))
                diff_stores(store, store, alpha=0.05, min_change=0.05)
            except StoreError as exc:
                assert "changed while it was read" in str(exc), exc
                refused += 1
                continue
            assert len(frame) in (SEEDS * (len(eps) - 1), SEEDS * len(eps)), len(frame)
            whole += 1
        assert grow.returncode == 0, grow.stderr.read() if grow.stderr else ""
    assert whole, "no read completed"
