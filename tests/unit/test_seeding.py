"""Seeding: identity-keyed, platform- and process-independent, paired across algorithms."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from dpbench.core.seeding import canonical, data_identity, id_words, make_rng, mechanism_identity


def test_canonical_is_order_and_type_stable() -> None:
    assert canonical({"b": 1, "a": 2.0}) == canonical({"a": 2, "b": 1.0})
    assert canonical([1e-6]) == canonical([0.000001])
    assert canonical({"x": np.float64(0.5), "y": np.int64(3)}) == canonical({"x": 0.5, "y": 3})
    assert canonical([float("inf")]) != canonical([1e308])


def test_same_identity_same_stream_different_identity_different_stream() -> None:
    ident = data_identity("lb_lin", {"radius": 1.0}, 10, 3, 0)
    a = make_rng(ident, 5).standard_normal(4)
    b = make_rng(ident, 5).standard_normal(4)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, make_rng(ident, 6).standard_normal(4))
    other = data_identity("lb_lin", {"radius": 1.0}, 10, 3, 1)
    assert not np.array_equal(a, make_rng(other, 5).standard_normal(4))


def test_data_stream_is_shared_by_algorithms_but_mechanism_streams_differ() -> None:
    d = data_identity("lb_quad", {}, 10, 3, 2)
    m1 = mechanism_identity("noisy_sgd", {"sigma_mode": "paper"}, d, {"epsilon": 1.0})
    m2 = mechanism_identity("noisy_sgd", {"sigma_mode": "accountant"}, d, {"epsilon": 1.0})
    assert id_words(m1) != id_words(m2)
    # the data identity carries no algorithm, epsilon or delta: comparisons are paired
    assert set(d) == {"stream", "problem", "params", "n", "p", "seed"}


def test_stream_does_not_depend_on_python_hash_seed() -> None:
    code = ("from dpbench.core.seeding import make_rng, data_identity;"
            "print(make_rng(data_identity('lb_lin', {}, 5, 2, 3), 1).integers(0, 2**62))")
    outs = set()
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        outs.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                text=True, check=True).stdout.strip())
    assert len(outs) == 1
    here = str(make_rng(data_identity("lb_lin", {}, 5, 2, 3), 1).integers(0, 2**62))
    assert outs == {here}


def test_seed_templates_give_the_per_cell_streams_bit_for_bit() -> None:
    """The per-chunk templates (canonical JSON once, the seed spliced in) hash exactly the bytes
    the per-cell canonicalisation gives: same words, same streams, same cache keys, for seeds of
    every size, floats, nested params and a parameter that happens to hold the sentinel (the
    fallback path)."""
    from dpbench.core.seeding import SeedTemplate, stable_hash

    sentinel = SeedTemplate._SENTINEL
    for params in ({}, {"lam": 0.5, "k": 3, "w": [1.0, 2.5e-7]}, {"x": sentinel},
                   {"s": str(sentinel)}):
        def make(seed: int, params: dict = params) -> dict:
            return mechanism_identity("noisy_sgd", params,
                                      data_identity("lb_lin", params, 50, 3, seed),
                                      {"n": 50, "p": 3, "epsilon": 0.25, "delta": 1e-6})

        t = SeedTemplate(make)
        assert (t._parts is None) == (params in ({"x": sentinel}, {"s": str(sentinel)}))
        for seed in (0, 1, 9, 10, 12345, 2**40 + 7):
            assert t.words(seed) == id_words(make(seed))
            assert t.hexdigest(seed) == stable_hash(make(seed))
            assert np.array_equal(t.rng(seed, 3).integers(0, 2**62, 4),
                                  make_rng(make(seed), 3).integers(0, 2**62, 4))
