"""The store knows no plugin (issue 32): it imports none and is prepared from plain records that
configuration builds once per experiment, each plugin built once."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dpbench.config.records import suite_record
from dpbench.config.suite import parse_suite
from dpbench.core.grid import GridPoint
from dpbench.core.registry import get
from dpbench.store.cube import Store
from dpbench.store.summary import stored_expectations

SUITE = """\
name: rec
root_seed: 3
seeds: 2
experiments:
  - name: e
    problems:
      - problem: lb_quad
    algorithms:
      - algorithm: output_perturbation
      - algorithm: noisy_sgd
    grid: {n: [20, 40], p: [2], epsilon: [1.0], delta: [1.0e-5]}
    expect:
      - {id: R, algorithm: noisy_sgd, problem: lb_quad, axis: n, slope: -1,
         derived: {sigma: 2}, source: test}
"""


def test_store_modules_import_no_plugin_and_no_configuration() -> None:
    code = ("import sys, pkgutil, importlib, dpbench.store as s\n"
            "for m in pkgutil.iter_modules(s.__path__): importlib.import_module('dpbench.store.' + m.name)\n"
            "bad = sorted(m for m in sys.modules if m.startswith(('dpbench.algorithms', "
            "'dpbench.problems', 'dpbench.datasets', 'dpbench.config', 'dpbench.engine')))\n"
            "print(' '.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the store imports {out.stdout.strip()}"


def test_a_record_is_plain_data_and_builds_each_plugin_once(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    built: list[str] = []
    cls = get("algorithms", "output_perturbation")
    original = cls.rate_card

    def counting(self):  # type: ignore[no-untyped-def]
        built.append(self.name)
        return original(self)

    suite = parse_suite(SUITE, "rec.yaml")          # validation builds it too
    monkeypatch.setattr(cls, "rate_card", counting)
    record = suite_record(suite)
    assert built == ["output_perturbation"]           # once per experiment, not per use
    exp = record.experiment("e")
    json.dumps(dataclasses.asdict(record))           # no plugin object inside
    assert exp.coords["n"] == [20, 40] and exp.shape == (2, 1, 2, 1, 1, 1, 2)
    assert set(exp.theory) == {"output_perturbation", "noisy_sgd"}
    assert exp.theory["noisy_sgd"]["rate_card"] is not None
    assert [e["id"] for e in exp.expectations] == ["R"]
    assert exp.expectations[0]["derivation"]["points"], "derived exponents computed at plan time"


def test_derivations_are_reused_from_the_store(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    record = suite_record(parse_suite(SUITE, "rec.yaml"))
    Store.prepare(tmp_path / "s.zarr", record)
    previous = stored_expectations(tmp_path / "s.zarr")
    assert previous["e"] == json.loads(json.dumps(record.experiment("e").expectations))
    import dpbench.config.theory as theory

    def fail(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("an unchanged derivation was recomputed")

    monkeypatch.setattr(theory, "derivation", fail)
    again = suite_record(parse_suite(SUITE, "rec.yaml"), previous)
    assert again.experiment("e").expectations[0]["derivation"] == previous["e"][0]["derivation"]


def test_grid_points_carry_their_routed_axes() -> None:
    point = GridPoint.from_values({"n": 5, "p": 2, "epsilon": 1, "delta": 0, "radius": 0.5,
                                   "steps": 3}, {"radius": "problem", "steps": "algorithm"})
    assert point.problem_axes == (("radius", 0.5),) and point.algorithm_axes == (("steps", 3),)
    assert point.identity() == {"n": 5, "p": 2, "epsilon": 1.0, "delta": 0.0, "radius": 0.5,
                                "steps": 3}
    assert point.describe() == "n=5, p=2, ε=1, δ=0, radius=0.5, steps=3"
