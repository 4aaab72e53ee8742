"""Dataset-backed problems: loaders, preparation, split, subsample stream, identity, errors
(docs/datasets.md)."""

from __future__ import annotations

import builtins
import hashlib
import json
import math
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpbench.config.suite import load_suite, parse_suite
from dpbench.core.errors import SuiteError, UserInputError
from dpbench.core.seeding import data_identity, make_rng
from dpbench.datasets import (
    BUNDLED,
    DatasetError,
    load,
    load_bundled,
    locate,
    read_csv,
    read_npz,
    read_svmlight,
    split_rows,
)
from dpbench.datasets import source as dsource
from dpbench.problems.real_data import (
    RealHinge,
    RealLeastSquares,
    RealLogistic,
    held_out_optimum,
)
from dpbench.testing import check_problem

CSV = "a,b,c,label\n" + "".join(f"{i % 5}.5,{i * 0.1:.2f},{(i * 7) % 3},{'yes' if i % 3 else 'no'}\n"
                                 for i in range(40))


def _csv(tmp_path: Path, text: str = CSV, name: str = "d.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _rows(problem, n: int, seed: int) -> np.ndarray:
    data = problem.generate(n, problem.dimension,
                            make_rng(data_identity(problem.name, problem.identity_params(), n,
                                                   problem.dimension, seed), 0))
    return np.hstack([data.X, data.y[:, None]])


# --- loaders -------------------------------------------------------------------------------------

def test_csv_with_header_label_by_name_and_feature_columns() -> None:
    table = read_csv(CSV.encode(), label_column="label")
    assert table.X.shape == (40, 3) and table.columns == ("a", "b", "c")
    assert table.label == "label" and set(table.y) == {"yes", "no"}
    assert table.X[3].tolist() == [3.5, 0.3, 0.0]
    picked = read_csv(CSV.encode(), label_column="label", feature_columns="c, a")
    assert picked.columns == ("c", "a") and picked.X[3].tolist() == [0.0, 3.5]
    by_index = read_csv(CSV.encode(), label_column=3, feature_columns="0,2")
    assert by_index.columns == ("a", "c")


def test_csv_without_header_label_by_index_and_numeric_labels() -> None:
    text = "1,2,0\n3,4,1\n\n5,6,1\n"
    table = read_csv(text.encode(), header=False, label_column=0)
    assert table.columns == ("1", "2") and table.y.tolist() == [1.0, 3.0, 5.0]
    last = read_csv(text.encode(), header=False)
    assert last.y.dtype == float and last.y.tolist() == [0.0, 1.0, 1.0]
    assert last.X.tolist() == [[1, 2], [3, 4], [5, 6]]


def test_npz_default_and_renamed_arrays(tmp_path: Path) -> None:
    X = np.arange(12.0).reshape(6, 2)
    np.savez(tmp_path / "a.npz", X=X, y=np.array([0, 1] * 3))
    np.savez(tmp_path / "b.npz", feats=X, target=np.array(["u", "v", "w"] * 2))
    a = read_npz((tmp_path / "a.npz").read_bytes())
    assert np.array_equal(a.X, X) and a.y.tolist() == [0.0, 1.0] * 3
    b = read_npz((tmp_path / "b.npz").read_bytes(), x_array="feats", y_array="target")
    assert b.y.tolist() == ["u", "v", "w"] * 2


def test_svmlight_one_and_zero_based() -> None:
    one = read_svmlight(b"# comment\n+1 1:0.5 3:2\n-1 2:1.5 # trailing\n")
    assert one.X.tolist() == [[0.5, 0.0, 2.0], [0.0, 1.5, 0.0]] and one.y.tolist() == [1, -1]
    zero = read_svmlight(b"1 0:1 2:3\n0 1:2\n")
    assert zero.X.tolist() == [[1, 0, 3], [0, 2, 0]] and zero.columns == ("0", "1", "2")


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_bundled_sklearn_data_sets(name: str) -> None:
    pytest.importorskip("sklearn")
    table = load_bundled(name)
    rows, features = {"breast_cancer": (569, 30), "digits": (1797, 64), "wine": (178, 13),
                      "diabetes": (442, 10), "iris": (150, 4)}[name]
    assert table.X.shape == (rows, features) and table.y.shape == (rows,)
    assert np.isfinite(table.X).all()


def test_missing_scikit_learn_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_sklearn(name, *args, **kwargs):
        if name == "sklearn" or name.startswith("sklearn."):
            raise ImportError("No module named 'sklearn'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sklearn)
    with pytest.raises(DatasetError, match=r"pip install 'dp-ratebench\[datasets\]'"):
        load_bundled("iris")


# --- bad files -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, kwargs, param, fragment", [
    ("", {}, "dataset", "is empty"),
    ("a,b\n", {}, "dataset", "no data rows"),
    ("a\n1\n", {}, "dataset", "at least one feature"),
    ("a,a,y\n1,2,0\n", {}, "header", "twice"),
    ("a,b,y\n1,2\n", {}, "dataset", "has 2 fields"),
    ("a,b,y\n1,x,0\n", {}, "dataset", "not a number"),
    ("a,b,y\n1,nan,0\n", {}, "dataset", "non-finite"),
    ("a,b,y\n1,inf,0\n", {}, "dataset", "non-finite"),
    ("a,b,y\n1,,0\n", {}, "dataset", "missing"),
    ("a,b,y\n1,2,\n", {}, "label_column", "no label"),
    ("a,b,y\n1,2,0\n", {"label_column": "z"}, "label_column", "no column named"),
    ("a,b,y\n1,2,0\n", {"label_column": 7}, "label_column", "out of range"),
    ("1,2,0\n", {"header": False, "label_column": "y"}, "label_column", "needs a header"),
    ("a,b,y\n1,2,0\n", {"feature_columns": "a,y"}, "feature_columns", "includes the label"),
    ("a,b,y\n1,2,0\n", {"feature_columns": "a,a"}, "feature_columns", "twice"),
    ("a,b,y\n1,2,0\n", {"feature_columns": " , "}, "feature_columns", "names no column"),
])
def test_bad_csv(text: str, kwargs: dict, param: str, fragment: str) -> None:
    with pytest.raises(DatasetError, match=fragment) as info:
        read_csv(text.encode(), **kwargs)
    assert info.value.param == param


def test_bad_csv_encoding() -> None:
    with pytest.raises(DatasetError, match="not UTF-8"):
        read_csv(b"a,b\n\xff,1\n")


def test_bad_npz(tmp_path: Path) -> None:
    cases = {
        "noX": ({"Z": np.zeros((3, 2)), "y": np.zeros(3)}, "x_array", "has no array 'X'"),
        "noy": ({"X": np.zeros((3, 2))}, "y_array", "has no array 'y'"),
        "flat": ({"X": np.zeros(3), "y": np.zeros(3)}, "x_array", "must be 2-D"),
        "short": ({"X": np.zeros((3, 2)), "y": np.zeros(2)}, "y_array", "one label per row"),
        "text": ({"X": np.array([["a", "b"]]), "y": np.zeros(1)}, "x_array", "numeric"),
        "nan": ({"X": np.array([[1.0, np.nan]]), "y": np.zeros(1)}, "dataset", "non-finite"),
        "obj": ({"X": np.zeros((1, 2)), "y": np.array([{}], dtype=object)}, "y_array",
                "pickles"),
    }
    for key, (arrays, param, fragment) in cases.items():
        np.savez(tmp_path / f"{key}.npz", **arrays)
        with pytest.raises(DatasetError, match=fragment) as info:
            read_npz((tmp_path / f"{key}.npz").read_bytes())
        assert info.value.param == param, key
    with pytest.raises(DatasetError, match="not a numpy .npz"):
        read_npz(b"not a zip")


@pytest.mark.parametrize("text, fragment", [
    (b"", "no data rows"),
    (b"abc 1:2\n", "not a numeric label"),
    (b"1 qid:3 1:2\n", "qid"),
    (b"1 1:2 1:3\n", "twice"),
    (b"1 1:nan\n", "non-finite"),
    (b"1 a:2\n", "not index:value"),
    (b"1\n-1\n", "no feature values"),
])
def test_bad_svmlight(text: bytes, fragment: str) -> None:
    with pytest.raises(DatasetError, match=fragment):
        read_svmlight(text)


def test_bad_names_and_options(tmp_path: Path) -> None:
    for value in ("breast_cancer", "xls:a", "csv:", "sklearn: "):
        with pytest.raises(DatasetError, match="not a data set name"):
            load(value)
    with pytest.raises(DatasetError, match="did you mean 'breast_cancer'"):
        load("sklearn:breast_cancr")
    with pytest.raises(DatasetError, match="cannot read"):
        load(f"csv:{tmp_path / 'nope.csv'}")
    with pytest.raises(DatasetError, match="not a file"):
        load(f"csv:{tmp_path}")
    with pytest.raises(DatasetError, match="applies to csv data sets only") as info:
        load("sklearn:iris", label_column="x")
    assert info.value.param == "label_column"


@pytest.mark.parametrize("params, fragment", [
    ({"dataset": "sklearn:iris"}, "parameter 'positive': the labels have 3 classes"),
    ({"dataset": "sklearn:iris", "positive": 7}, "no label equals 7"),
    ({"dataset": "sklearn:diabetes"}, "214 classes"),
    ({"dataset": "sklearn:wine", "positive": 0, "sha256": "abc"}, "parameter 'sha256'"),
])
def test_problem_errors_name_the_parameter(params: dict, fragment: str) -> None:
    with pytest.raises(UserInputError, match=fragment):
        RealLogistic(**params)


def test_least_squares_needs_numeric_labels(tmp_path: Path) -> None:
    path = _csv(tmp_path)
    with pytest.raises(UserInputError, match="parameter 'label_column': least squares needs "
                                             "numeric labels"):
        RealLeastSquares(dataset=f"csv:{path}")


def test_one_class_and_constant_labels(tmp_path: Path) -> None:
    one = _csv(tmp_path, "a,y\n" + "".join(f"{i},1\n" for i in range(10)))
    with pytest.raises(UserInputError, match="single class"):
        RealHinge(dataset=f"csv:{one}")
    with pytest.raises(UserInputError, match="constant"):
        RealLeastSquares(dataset=f"csv:{one}")


# --- labels, preparation, split ------------------------------------------------------------------

def test_label_rules(tmp_path: Path) -> None:
    path = _csv(tmp_path)
    binary = RealLogistic(dataset=f"csv:{path}")
    labels = binary.preparation["labels"]
    assert labels["positive"] == "yes" and labels["negative"] == ["no"]   # the larger class
    table = read_csv(CSV.encode())
    pool, test = split_rows(40, 0.3, binary.sha256)
    expect = np.where(table.y == "yes", 1.0, -1.0)
    assert np.array_equal(binary._prepared.y_pool, expect[pool])
    assert np.array_equal(binary._prepared.y_test, expect[test])
    flipped = RealLogistic(dataset=f"csv:{path}", positive="no")
    assert np.array_equal(flipped._prepared.y_pool, -binary._prepared.y_pool)
    iris = RealLogistic(dataset="sklearn:iris", positive=2)               # one-vs-rest
    assert iris.preparation["labels"]["negative"] == [0.0, 1.0]
    assert iris.preparation["labels"]["count_positive"] == 50


@pytest.mark.parametrize("rows", ["clip", "unit"])
@pytest.mark.parametrize("data_norm", [1.0, 0.3])
def test_rows_within_data_norm_and_recorded(rows: str, data_norm: float) -> None:
    problem = RealLeastSquares(rows=rows, data_norm=data_norm, intercept=True, label_bound=2.0)
    prep = problem._prepared
    for X in (prep.X_pool, prep.X_test):
        norms = np.linalg.norm(X, axis=1)
        assert norms.max() <= data_norm
        if rows == "unit":
            np.testing.assert_allclose(norms, data_norm, rtol=1e-12)
    for y in (prep.y_pool, prep.y_test):
        assert np.abs(y).max() <= 2.0
    assert prep.y_pool.min() == -2.0 and prep.y_pool.max() == 2.0        # the pool's range
    assert problem.dimension == 11 and problem.constants()["data_norm"] == data_norm
    meta = problem.preparation
    assert meta["features_scaling"]["rows"] == rows
    assert meta["features_scaling"]["intercept"] is True
    assert meta["split"] == {**meta["split"], "pool": 309, "test": 133}
    data = problem.generate(20, 11, np.random.default_rng(0))
    assert data.meta["preparation"] is meta and data.meta["sha256"] == problem.sha256


def test_column_scaling_by_the_pool_range(tmp_path: Path) -> None:
    path = _csv(tmp_path, "a,b,k,y\n" + "".join(f"{i},{10 * i},3,{i % 2}\n" for i in range(20)))
    problem = RealLogistic(dataset=f"csv:{path}", data_norm=10.0)      # nothing clipped
    pool = problem._prepared.X_pool
    assert pool[:, 0].min() == -1.0 and pool[:, 0].max() == 1.0
    np.testing.assert_allclose(pool[:, 0], pool[:, 1], rtol=0, atol=1e-15)
    assert not pool[:, 2].any()                                          # constant column -> 0
    assert problem.preparation["features_scaling"]["constant_columns"] == [2]
    assert problem.preparation["features_scaling"]["clipped_pool_rows"] == 0


def test_split_is_keyed_by_the_content_not_the_seed() -> None:
    pool, test = split_rows(100, 0.3, "d1")
    assert len(test) == 30 and len(pool) == 70 and not set(pool) & set(test)
    again = split_rows(100, 0.3, "d1")
    assert all(np.array_equal(a, b) for a, b in zip((pool, test), again))
    assert not np.array_equal(test, split_rows(100, 0.3, "d2")[1])
    with pytest.raises(DatasetError, match="too few"):
        split_rows(2, 0.3, "d")


# --- the subsample stream ------------------------------------------------------------------------

def test_subsample_without_replacement_and_deterministic() -> None:
    problem = RealLogistic()
    a, b, c = (_rows(problem, 200, s) for s in (0, 0, 1))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    data = problem.generate(398, 30, np.random.default_rng(3))
    assert len(np.unique(data.meta["pool_rows"])) == 398                # all of the pool, once
    dsource._prepared.cache_clear()
    dsource._bundled.cache_clear()
    held_out_optimum.cache_clear()
    assert np.array_equal(_rows(RealLogistic(), 200, 0), a)              # a fresh cache


def test_subsample_is_the_same_in_another_process(tmp_path: Path) -> None:
    path = _csv(tmp_path)
    here = RealHinge(dataset=f"csv:{path}", intercept=True)
    code = (
        "import hashlib, json, sys\n"
        "import numpy as np\n"
        "from dpbench.core.seeding import data_identity, make_rng\n"
        "from dpbench.problems.real_data import RealHinge\n"
        "p = RealHinge(**json.loads(sys.argv[1]))\n"
        "d = p.generate(12, p.dimension, make_rng(data_identity(p.name, p.identity_params(), 12,"
        " p.dimension, 5), 0))\n"
        "print(hashlib.sha256(d.X.tobytes() + d.y.tobytes()).hexdigest())\n")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(here.get_params())],
                         capture_output=True, text=True, check=True, timeout=120)
    data = here.generate(12, here.dimension, make_rng(data_identity(
        here.name, here.identity_params(), 12, here.dimension, 5), 0))
    assert out.stdout.strip() == hashlib.sha256(data.X.tobytes() + data.y.tobytes()).hexdigest()


# --- identity ------------------------------------------------------------------------------------

def test_identity_sees_the_content_not_the_path(tmp_path: Path) -> None:
    first = _csv(tmp_path, name="one.csv")
    (tmp_path / "sub").mkdir()
    moved = _csv(tmp_path / "sub", name="two.csv")
    a = RealLogistic(dataset=f"csv:{first}")
    b = RealLogistic(dataset=f"csv:{moved}")
    assert a.sha256 == hashlib.sha256(CSV.encode()).hexdigest()
    assert a.identity_params() == b.identity_params()
    assert a.identity_params()["dataset"] == "csv"
    assert np.array_equal(_rows(a, 10, 2), _rows(b, 10, 2))
    moved.write_text(CSV.replace("0.5,0.00", "1.5,0.00"))
    c = RealLogistic(dataset=f"csv:{moved}")                             # re-read: new content
    assert c.sha256 != a.sha256 and c.identity_params() != a.identity_params()
    with pytest.raises(UserInputError, match="parameter 'sha256'.*changed since"):
        RealLogistic(dataset=f"csv:{moved}", sha256=a.sha256)
    assert RealLogistic().identity_params()["dataset"] == "sklearn:breast_cancer"


def test_pickle_reloads_and_checks() -> None:
    problem = RealLeastSquares(ridge=0.1)
    again = pickle.loads(pickle.dumps(problem))
    assert again == problem and "_prepared" in vars(again)
    assert len(pickle.dumps(problem)) < 2000                            # parameters only


def test_relative_paths_resolve_against_the_suite(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "suites" / "data").mkdir(parents=True)
    _csv(tmp_path / "suites" / "data")
    suite = tmp_path / "suites" / "s.yaml"
    suite.write_text(
        "name: s\nroot_seed: 1\nseeds: 1\nexperiments:\n  - name: e\n    problems:\n"
        "      - problem: real_logistic\n        params: {dataset: 'csv:data/d.csv'}\n"
        "    algorithms: [{algorithm: nonprivate_erm}]\n"
        "    grid: {n: [10], p: [3], epsilon: [1.0]}\n")
    monkeypatch.chdir(tmp_path)
    spec = load_suite(suite).experiments[0].problems[0]
    assert spec.params["dataset"] == f"csv:{tmp_path / 'suites' / 'data' / 'd.csv'}"
    assert spec.params["sha256"] == hashlib.sha256(CSV.encode()).hexdigest()   # pinned
    with pytest.raises(SuiteError, match=r"problems\[real_logistic\]\.params: .*cannot read"):
        parse_suite(suite.read_text(), "text")                          # cwd: no data/ here
    assert locate("csv:/abs/x.csv", tmp_path) == "csv:/abs/x.csv"
    assert locate("sklearn:iris", tmp_path) == "sklearn:iris"


def test_grid_checks() -> None:
    problem = RealLogistic()
    assert problem.check_grid({"n": [10, 398], "p": [30]}) == {}
    bad = problem.check_grid({"n": [10, 399], "p": [3, 30], "dataset": ["sklearn:wine"]})
    assert "p must be [30]" in bad["p"] and "n must be at most 398" in bad["n"]
    assert "one problem label per data set" in bad["dataset"]
    with pytest.raises(UserInputError, match="dimension 30, not p = 3"):
        problem.generate(5, 3, np.random.default_rng(0))
    with pytest.raises(UserInputError, match="exceeds the training pool"):
        problem.generate(399, 30, np.random.default_rng(0))


# --- the problems --------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [RealLogistic, RealHinge, RealLeastSquares])
def test_population_excess_is_at_least_minus_the_gap(cls) -> None:
    problem = cls(ridge=0.01)
    gap = held_out_optimum(problem).gap
    data = problem.generate(100, problem.dimension, np.random.default_rng(4))
    rng = np.random.default_rng(5)
    thetas = [problem.solve(data).theta, problem.constraint.center(problem.dimension),
              *(problem.constraint.project(rng.normal(size=problem.dimension))
                for _ in range(5))]
    values = [problem.population_excess(t, problem.dimension, 100) for t in thetas]
    assert all(math.isfinite(v) and v >= -gap - 1e-12 for v in values)
    assert problem.population_excess(held_out_optimum(problem).theta, problem.dimension) <= gap


def test_losses_are_those_of_the_synthetic_problems() -> None:
    from dpbench.problems.hinge_svm import HingeSVM
    from dpbench.problems.logistic import Logistic

    for real, synthetic in ((RealLogistic(ridge=0.1), Logistic(ridge=0.1)),
                            (RealHinge(ridge=0.1), HingeSVM(ridge=0.1))):
        data = real.generate(50, 30, np.random.default_rng(0))
        theta = real.constraint.project(np.random.default_rng(1).normal(size=30))
        assert np.array_equal(real.loss(theta, data), synthetic.loss(theta, data))
        assert np.array_equal(real.grad(theta, data), synthetic.grad(theta, data))
        assert real.lipschitz == synthetic.lipschitz and real.smoothness == synthetic.smoothness
        assert real.kernel().loss is synthetic.kernel().loss


@pytest.mark.parametrize("problem", [
    RealLogistic(dataset="sklearn:digits", positive=3, intercept=True, ridge=0.05),
    RealHinge(intercept=True, rows="unit", data_norm=0.5, radius=5.0),
    RealLeastSquares(ridge=0.1, label_bound=0.5, rows="unit"),
], ids=lambda p: p.name)
def test_harness_on_non_default_configurations(problem) -> None:
    """The harness (its data-bound check draws n = 200: a pool of at least 200 rows)."""
    check_problem(problem)


def test_small_data_sets_are_usable() -> None:
    problem = RealHinge(dataset="sklearn:iris", positive="2", rows="unit")
    assert problem.pool_size == 105 and problem.dimension == 4
    data = problem.generate(105, 4, np.random.default_rng(0))
    assert np.abs(np.linalg.norm(data.X, axis=1) - 1.0).max() < 1e-12
    assert problem.solve(data).gap <= 1e-10


def test_audits_resolve_paths_and_check_the_grid(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    _csv(tmp_path / "data")
    suite = tmp_path / "a.yaml"
    suite.write_text(
        "name: a\nroot_seed: 1\naudit: {runs: 200, selection_runs: 200}\naudits:\n  - name: a\n"
        "    algorithms: [{algorithm: output_perturbation}]\n"
        "    problems: [{problem: real_logistic, params: {dataset: 'csv:data/d.csv', "
        "ridge: 0.1}}]\n    canaries: [sphere]\n"
        "    grid: {n: [10, 50], p: [4], epsilon: [1.0], delta: [0.0]}\n")
    with pytest.raises(SuiteError) as info:
        load_suite(suite)
    assert [line.split(":")[0] for line in info.value.problems] == ["audits[0].grid.p",
                                                                    "audits[0].grid.n"]
    suite.write_text(suite.read_text().replace("[10, 50], p: [4]", "[10], p: [3]"))
    spec = load_suite(suite).audits[0].problems[0]
    assert spec.params["dataset"] == f"csv:{tmp_path / 'data' / 'd.csv'}"
