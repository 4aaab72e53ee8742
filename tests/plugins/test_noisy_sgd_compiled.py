"""NoisySGD's compiled loops: the values of version 3 bit for bit, and numba's on-disk cache
(:mod:`dpbench.numerics.jit`) shared by processes that compile and load it at the same time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from dpbench.algorithms import noisy_sgd
from dpbench.algorithms.noisy_sgd import noisy_sgd_chains, noisy_sgd_path
from dpbench.core.sets import BallAt, Intersection
from dpbench.numerics.jit import _SafeIndexDataCacheFile, specialise
from dpbench.numerics.kernels import LossKernel, linear_grad, linear_loss
from dpbench.problems.lb_lin import LBLin
from dpbench.problems.logistic import Logistic

#: Outputs of the compiled path as committed (NoisySGD version 3, before the loops were
#: specialised per kernel), as float.hex: the cubes depend on them bit for bit.
GOLDEN = {
    "lblin_last": ["0x1.40364bc831918p-1", "0x1.22bc94b0c932ap-1", "0x1.12021073d35f1p-1"],
    "lblin_inter_suffix": ["0x1.1a7c012db0a32p-1", "0x1.f99219e82d94fp-2",
                           "0x1.1bfca2de6ec14p-1"],
    "lblin_chains_average": ["0x1.9ff5f5c283bd8p-2", "0x1.090e37ab57141p-1",
                             "0x1.891d330e8953fp-2", "0x1.23fe3cf765e3ep-3",
                             "0x1.19b21df459848p-1", "0x1.37976d2b598c8p-2"],
    "logistic_average": ["0x1.5f53521c5b8e8p-3", "-0x1.76e7dbc1a663fp-5",
                         "-0x1.15db013eccff1p-2"],
}


def golden_cases() -> dict[str, list[str]]:
    """The configurations of ``GOLDEN``: a last iterate over a block boundary (8200 steps), an
    intersection of balls (Dykstra) with the suffix average, two chains of the audit path, and
    logistic regression (a kernel with helper functions) with the average."""
    lb = LBLin()
    d = lb.generate(40, 3, np.random.default_rng(7))
    inter = Intersection(lb.constraint, BallAt(np.full(3, 0.2), 0.6))
    lg = Logistic()
    dl = lg.generate(40, 3, np.random.default_rng(8))
    out = {
        "lblin_last": noisy_sgd_path(
            lb, d, constraint=lb.constraint, steps=8200, sigma=80.0, lipschitz=1.0,
            variant="lipschitz", rng=np.random.default_rng(1)),
        "lblin_inter_suffix": noisy_sgd_path(
            lb, d, constraint=inter, steps=300, sigma=80.0, lipschitz=1.0,
            variant="strongly_convex", strong_convexity=0.5, output="suffix",
            rng=np.random.default_rng(2)),
        "lblin_chains_average": noisy_sgd_chains(
            lb, d, constraint=lb.constraint, steps=99, sigma=80.0, lipschitz=1.0,
            variant="lipschitz", output="average", rng=np.random.default_rng(3), size=2),
        "logistic_average": noisy_sgd_path(
            lg, dl, constraint=lg.constraint, steps=500, sigma=80.0,
            lipschitz=float(lg.lipschitz), variant="lipschitz", output="average",
            rng=np.random.default_rng(4)),
    }
    return {k: [float(v).hex() for v in np.ravel(th)] for k, th in out.items()}


def test_compiled_path_reproduces_version_3_bit_for_bit() -> None:
    assert golden_cases() == GOLDEN


def test_unused_normals_of_the_last_block_are_drawn() -> None:
    """The stream after a run is the numpy path's: full blocks of ``BLOCK`` indices and
    ``BLOCK × p`` normals, whatever T (Localize draws nothing after, but a caller may)."""
    lb = LBLin()
    d = lb.generate(30, 2, np.random.default_rng(0))
    for steps in (1, noisy_sgd.BLOCK - 1, noisy_sgd.BLOCK + 1):
        rng = np.random.default_rng(9)
        noisy_sgd_path(lb, d, constraint=lb.constraint, steps=steps, sigma=1.0, lipschitz=1.0,
                       variant="lipschitz", rng=rng)
        ref = np.random.default_rng(9)
        for _ in range(-(-steps // noisy_sgd.BLOCK)):
            ref.integers(0, 30, size=noisy_sgd.BLOCK)
            ref.standard_normal((noisy_sgd.BLOCK, 2))
        assert rng.bit_generator.state == ref.bit_generator.state


# --- the on-disk cache under concurrent processes --------------------------------------------
_CHILD = textwrap.dedent("""
    import json
    from dpbench.algorithms import noisy_sgd
    from dpbench.problems.lb_lin import LBLin
    from dpbench.problems.logistic import Logistic
    from tests.plugins.test_noisy_sgd_compiled import golden_cases

    values = golden_cases()
    hits = misses = 0
    for problem in (LBLin(), Logistic()):
        for loop in noisy_sgd._compiled_loops(problem.kernel().grad):
            hits += sum(loop.stats.cache_hits.values())
            misses += sum(loop.stats.cache_misses.values())
    print(json.dumps({"values": values, "hits": hits, "misses": misses}))
""")


def _start(cache_dir: Path) -> subprocess.Popen:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir), "OPENBLAS_NUM_THREADS": "1"}
    root = Path(__file__).resolve().parents[2]
    return subprocess.Popen([sys.executable, "-c", _CHILD], env=env, cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _results(procs: list[subprocess.Popen]) -> list[dict]:
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


@pytest.mark.slow
def test_processes_compile_and_load_one_cache_at_once(tmp_path: Path) -> None:
    """Three fresh processes compile the loops at the same time into one empty cache directory,
    then three more load them from it at the same time: all six give the committed values, and
    the second three compile nothing."""
    cache_dir = tmp_path / "numba-cache"
    cold = _results([_start(cache_dir) for _ in range(3)])
    assert all(r["values"] == GOLDEN for r in cold)
    assert any(cache_dir.rglob("*.nbi")) and any(cache_dir.rglob("*.nbc"))
    warm = _results([_start(cache_dir) for _ in range(3)])
    assert all(r["values"] == GOLDEN for r in warm)
    assert all(r["misses"] == 0 and r["hits"] == 3 for r in warm), warm


_WRITER = textwrap.dedent("""
    import sys
    from dpbench.numerics.jit import _SafeIndexDataCacheFile
    cache_dir, writer = sys.argv[1], int(sys.argv[2])
    f = _SafeIndexDataCacheFile(cache_dir, "f-1.py3", "stamp")
    for i in range(60):
        f.save(("key", writer, i), ("data", writer, i))
""")


def test_cache_files_never_map_a_key_to_another_keys_data(tmp_path: Path) -> None:
    """Four processes save different keys of one function into one index at once (numba's own
    index/data files can then point a key to another key's data file, numba issue #10128): every
    entry of the final index loads its own data; entries lost to a concurrent rewrite of the
    index are misses, not wrong loads."""
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), str(w)],
                              stderr=subprocess.PIPE, text=True) for w in range(4)]
    for proc in procs:
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
    f = _SafeIndexDataCacheFile(str(tmp_path), "f-1.py3", "stamp")
    index = f._load_index()
    assert index
    for key in index:
        assert f.load(key) == ("data", *key[1:])
    assert not list(tmp_path.glob("*.tmp.*"))


def test_stale_index_or_foreign_stamp_is_a_miss(tmp_path: Path) -> None:
    """An index of another source stamp is a miss; the first save under the new stamp replaces
    it and deletes the old data files."""
    old = _SafeIndexDataCacheFile(str(tmp_path), "f-1.py3", "old source")
    old.save("k", "compiled from the old source")
    old.save("k2", "also from the old source")
    assert len(list(tmp_path.glob("*.nbc"))) == 2
    new = _SafeIndexDataCacheFile(str(tmp_path), "f-1.py3", "new source")
    assert new.load("k") is None
    new.save("k", "compiled from the new source")
    assert new.load("k") == "compiled from the new source"
    assert old.load("k") is None  # the index now carries the new stamp
    assert len(list(tmp_path.glob("*.nbc"))) == 1
    (tmp_path / "f-1.py3.nbi").write_bytes(b"truncated")
    assert new.load("k") is None


def test_specialise_binds_globals_and_names_the_cache_per_binding() -> None:
    @njit
    def double(x):  # type: ignore[no-untyped-def]
        return 2.0 * x

    def template(x):  # type: ignore[no-untyped-def]
        return _bound(x)  # noqa: F821 (bound by specialise)

    fn = specialise(template, {"_bound": double})
    assert fn(1.5) == 3.0
    assert fn.py_func.__qualname__.startswith(template.__qualname__ + "__double_")
    # A local function has no module-level name to key a cache by: compiled per process.
    assert fn._cache.__class__.__name__ == "NullCache"


# --- kernels the loops call rather than inline --------------------------------------------------
fastmath_linear_grad = njit(fastmath=True)(linear_grad.py_func)


class FastmathLBLin(LBLin):
    """LB-Lin with its gradient compiled with ``fastmath``: called by the loop, not inlined (an
    inlined function would lose its own options)."""

    def kernel(self) -> LossKernel:
        return LossKernel(linear_loss, fastmath_linear_grad, np.zeros(1))


class LocalKernelLBLin(LBLin):
    """LB-Lin with a kernel defined in a function: nothing to key a cache by."""

    def kernel(self) -> LossKernel:
        @njit
        def grad(theta, X, y, prm, i, out):  # type: ignore[no-untyped-def]
            for j in range(theta.shape[0]):
                out[j] = -X[i, j]

        return LossKernel(linear_loss, grad, np.zeros(1))


@pytest.mark.parametrize("cls", [FastmathLBLin, LocalKernelLBLin])
def test_other_kernels_get_their_own_loops(cls: type[LBLin]) -> None:
    problem, plain = cls(), LBLin()
    data = plain.generate(30, 3, np.random.default_rng(0))
    kw = dict(steps=500, sigma=20.0, lipschitz=1.0, variant="lipschitz", output="average")
    got = noisy_sgd_path(problem, data, constraint=problem.constraint,
                         rng=np.random.default_rng(1), **kw)  # type: ignore[arg-type]
    want = noisy_sgd_path(plain, data, constraint=plain.constraint,
                          rng=np.random.default_rng(1), **kw)  # type: ignore[arg-type]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    mine = noisy_sgd._compiled_loops(problem.kernel().grad)[0]
    theirs = noisy_sgd._compiled_loops(plain.kernel().grad)[0]
    assert mine.py_func.__qualname__ != theirs.py_func.__qualname__
    cached = type(mine._cache).__name__ == "SafeFunctionCache"
    assert cached == (cls is FastmathLBLin)
