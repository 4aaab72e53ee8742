"""Dataset-backed problems: the logistic, hinge and squared losses on real data (docs/datasets.md).

``real_logistic``, ``real_hinge`` and ``real_least_squares`` compute exactly the losses of the
synthetic ``logistic``, ``hinge_svm`` (margin losses, :class:`~dpbench.problems._linear_law.MarginLoss`)
and of :class:`~dpbench.problems.least_squares.SquaredLoss`; only the data source differs, and
:class:`DatasetProblem` is that source:

* the data set named by ``dataset`` (``sklearn:<name>``, ``csv:<path>``, ``npz:<path>``,
  ``svmlight:<path>``), parsed and prepared by :mod:`dpbench.datasets` (split, labels, feature
  scaling, rows within ``data_norm``), once per process;
* ``generate(n, p, rng)`` draws n rows *without replacement* from the training pool with the
  cell's data generator (p must be the data's dimension);
* ``population_excess`` is the mean loss on the held-out split minus its certified minimum over
  C (cached per process), as the synthetic laws' Monte Carlo population sample;
* the declared constants come from the parameters (``data_norm``, ``label_bound``, ``radius``,
  ``ridge``), never from the data: preparation enforces them on every row.

Identity: ``sha256`` pins the content (filled in when the data are first loaded, so a suite's
problems carry it to every worker, which refuses other data); ``dataset`` enters seed streams and
fingerprints as its kind only (:func:`dpbench.datasets.source.identity`), so moving a file and its
suite changes nothing while a changed file is another problem.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..core.errors import UserInputError
from ..core.params import Param
from ..core.problem import Dataset, Optimum, Problem
from ..core.tags import ProblemTags
from ..datasets import source
from ..datasets.files import DatasetError
from ..datasets.prepare import Prepared
from ._linear_law import LAW_PARAMS
from .hinge_svm import HingeSVM
from .least_squares import SquaredLoss
from .logistic import Logistic

__all__ = ["DatasetProblem", "RealHinge", "RealLeastSquares", "RealLogistic", "dataset_params"]


def dataset_params(default: str) -> dict[str, Param]:
    """The parameters every dataset-backed problem declares (``default``: its data set)."""
    return {
        "dataset": Param(default, kind="str", identity=source.identity,
                         doc="the data: sklearn:<name>, csv:<path>, npz:<path> or svmlight:<path> "
                             "(a relative path is resolved against the suite's directory)"),
        "sha256": Param(None, kind="str",
                        none="filled in with the digest of the data when they are loaded",
                        doc="SHA-256 of the data's content (the file's bytes; a bundled set's "
                            "arrays); other data are refused"),
        "header": Param(True, kind="bool", doc="csv: the first row names the columns"),
        "label_column": Param(None, kind="str", none="the last column",
                              alternatives=(Param(0, kind="int", low=0),),
                              doc="csv: the label column, by name or 0-based index"),
        "feature_columns": Param(None, kind="str", none="every column but the label",
                                 doc="csv: the feature columns, comma-separated names or "
                                     "0-based indices"),
        "x_array": Param("X", kind="str", doc="npz: the array of features (rows x columns)"),
        "y_array": Param("y", kind="str", doc="npz: the array of labels"),
        "test_fraction": Param(0.3, low=0.05, high=0.9,
                               doc="fraction of the rows held out for the population risk"),
        "data_norm": Param(1.0, low=0.0, low_open=True,
                           doc="bound on every prepared row's norm (rows are clipped to it)"),
        "rows": Param("clip", kind="str", choices=("clip", "unit"),
                      doc="clip: rows above data_norm are scaled down to it; unit: every "
                          "row is scaled to norm data_norm"),
        "intercept": Param(False, kind="bool", doc="append a constant feature (before the row "
                                                   "norm step)"),
    }


#: The positive class of a classification data set.
POSITIVE = Param(None, kind="str", none="two classes: the larger one is +1",
                 alternatives=(Param(0.0, kind="float"),),
                 doc="the class labelled +1, every other class -1 (one-vs-rest; required "
                     "for more than two classes)")


class DatasetProblem(Problem):
    """The data source of the dataset-backed problems (module docstring). Put it first among the
    bases, before the class that defines the loss: it provides ``generate``,
    ``population_excess``, ``feature_norm`` and the grid checks."""

    has_population: ClassVar[bool] = True
    #: ``binary`` (labels ±1) or ``regression`` (labels scaled into ±label_bound).
    task: ClassVar[str] = "binary"

    dataset: str
    sha256: str | None
    header: bool
    label_column: str | int | None
    feature_columns: str | None
    x_array: str
    y_array: str
    test_fraction: float
    data_norm: float
    rows: str
    intercept: bool

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._prepared = self._load()

    def _load(self) -> Prepared:
        """Read (cached) and prepare the data; fill in or check the pinned digest."""
        try:
            loaded = source.load(self.dataset, header=self.header,
                                 label_column=self.label_column,
                                 feature_columns=self.feature_columns, x_array=self.x_array,
                                 y_array=self.y_array)
            prepared = source.load_prepared(
                loaded, task=self.task, test_fraction=self.test_fraction,
                data_norm=self.data_norm, rows=self.rows, intercept=self.intercept,
                positive=getattr(self, "positive", None),
                label_bound=getattr(self, "label_bound", 1.0))
        except DatasetError as exc:
            raise UserInputError(f"problem {self.name!r}: {exc} ({self.dataset})") from None
        if self.sha256 is None:
            self.sha256 = loaded.digest
        elif self.sha256 != loaded.digest:
            raise UserInputError(
                f"problem {self.name!r}: parameter 'sha256': the data of {self.dataset!r} have "
                f"digest {loaded.digest}, not the pinned {self.sha256}: they changed since the "
                "suite was loaded (restore them, or start a new store)")
        return prepared

    def __getstate__(self) -> dict[str, Any]:
        """Pickled as its parameters; the data are loaded again (and checked) on unpickling."""
        return {k: v for k, v in self.__dict__.items() if k != "_prepared"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._prepared = self._load()

    # --- what the data allow ------------------------------------------------------------------
    @property
    def preparation(self) -> dict[str, Any]:
        """How the data were prepared (:attr:`dpbench.datasets.prepare.Prepared.meta`)."""
        return self._prepared.meta

    @property
    def dimension(self) -> int:
        return int(self._prepared.X_pool.shape[1])

    @property
    def pool_size(self) -> int:
        """Rows of the training pool (the largest n)."""
        return int(self._prepared.X_pool.shape[0])

    def check_grid(self, grid: Mapping[str, Sequence[Any]]) -> dict[str, str]:
        """p must be the data's dimension, n at most the pool's size; the data set is not an
        axis (one problem label per data set)."""
        out = super().check_grid(grid)
        split = self.preparation["split"]
        too_big = [v for v in grid.get("n", ()) if int(v) > self.pool_size]
        if too_big:
            out["n"] = (f"problem {self.name!r} draws n rows without replacement from a training "
                        f"pool of {self.pool_size} rows ({self.dataset}: {split['pool']} + "
                        f"{split['test']} held out): n must be at most {self.pool_size}, got "
                        f"{too_big}")
        for axis in ("dataset", "sha256"):
            if axis in grid:
                out[axis] = (f"problem {self.name!r}: {axis!r} cannot be a grid axis (the data "
                             "fix p and the pool); give one problem label per data set")
        return out

    @classmethod
    def locate(cls, params: Mapping[str, Any], base: Path) -> dict[str, Any]:
        out = dict(params)
        if "dataset" in out:
            out["dataset"] = source.locate(out["dataset"], base)
        return out

    @property
    def feature_norm(self) -> float:
        """Every prepared row has norm ≤ data_norm (the row step enforces it)."""
        return self.data_norm

    # --- data ---------------------------------------------------------------------------------
    def generate(self, n: int, p: int, rng: np.random.Generator) -> Dataset:
        """n rows drawn without replacement from the training pool with ``rng``."""
        if p != self.dimension:
            raise UserInputError(f"problem {self.name!r}: the data of {self.dataset!r} have "
                                 f"dimension {self.dimension}, not p = {p}")
        if n > self.pool_size:
            raise UserInputError(f"problem {self.name!r}: n = {n} exceeds the training pool of "
                                 f"{self.pool_size} rows")
        rows = rng.choice(self.pool_size, size=n, replace=False)
        prep = self._prepared
        return Dataset(prep.X_pool[rows], prep.y_pool[rows],
                       {"dataset": self.dataset, "sha256": self.sha256, "pool_rows": rows,
                        "preparation": prep.meta})

    def held_out(self) -> Dataset:
        """The held-out split (read-only arrays)."""
        prep = self._prepared
        return Dataset(prep.X_test, prep.y_test, {"dataset": self.dataset, "split": "test"})

    def population_excess(self, theta: np.ndarray, p: int, n: int | None = None) -> float:
        """Mean loss on the held-out split minus its certified minimum over C (cached per
        process); negative only by that optimum's gap plus rounding."""
        return self.risk(np.asarray(theta, dtype=float), self.held_out()) - \
            held_out_optimum(self).value


@functools.lru_cache(maxsize=16)
def held_out_optimum(problem: DatasetProblem) -> Optimum:
    """The certified minimiser over C of the mean loss on the held-out split (cached)."""
    return problem.solve(problem.held_out())


class RealLogistic(DatasetProblem, Logistic):
    """Logistic loss (+ ridge) on a ball, on a real data set (labels ±1)."""

    name: ClassVar[str] = "real_logistic"
    summary: ClassVar[str] = ("logistic loss log(1 + exp(-y<theta, x>)) (+ ridge) on a ball; a "
                              "real data set")
    citation: ClassVar[str] = ("Chaudhuri, Monteleoni, Sarwate (JMLR 2011), regularised logistic "
                               "regression on real data; Iyengar et al. (IEEE S&P 2019); "
                               "docs/datasets.md")
    version: ClassVar[str] = "1"
    task: ClassVar[str] = "binary"
    params: ClassVar[dict[str, Param]] = {
        **dataset_params("sklearn:breast_cancer"),
        "positive": POSITIVE,
        "radius": Param(1.0, low=0.0, low_open=True, doc="radius R of the ball C (diameter 2R)"),
        "ridge": LAW_PARAMS["ridge"],
    }

    def __dpbench_tags__(self) -> ProblemTags:
        """The logistic loss's claims (rank-1 data Hessian, 2-dim gradient shifts, the softplus
        form): claims about the loss, which hold on any data with ‖x‖ ≤ data_norm, y = ±1."""
        return Logistic.__dpbench_tags__(self)


class RealHinge(DatasetProblem, HingeSVM):
    """Hinge loss (+ ridge) on a ball, on a real data set (labels ±1)."""

    name: ClassVar[str] = "real_hinge"
    summary: ClassVar[str] = "hinge loss (1 - y<theta, x>)_+ (+ ridge) on a ball; a real data set"
    citation: ClassVar[str] = ("Chaudhuri, Monteleoni, Sarwate (JMLR 2011), SVM on real data; "
                               "Bassily, Smith, Thakurta (2014) §1; docs/datasets.md")
    version: ClassVar[str] = "1"
    task: ClassVar[str] = "binary"
    params: ClassVar[dict[str, Param]] = {
        **dataset_params("sklearn:breast_cancer"),
        "positive": POSITIVE,
        "radius": Param(3.0, low=0.0, low_open=True,
                        doc="radius R of the ball C (diameter 2R); the kink needs R*data_norm > 1"),
        "ridge": LAW_PARAMS["ridge"],
    }

    def __dpbench_tags__(self) -> ProblemTags:
        """The hinge loss's margin claims (rank-1 Hessian part, 2-dim gradient shifts)."""
        return HingeSVM.__dpbench_tags__(self)


class RealLeastSquares(DatasetProblem, SquaredLoss):
    """Squared loss (+ ridge) on a ball, on a real data set (labels scaled into ±label_bound)."""

    name: ClassVar[str] = "real_least_squares"
    summary: ClassVar[str] = ("squared loss (<theta, x> - y)^2/2 (+ ridge) on a ball; a real data "
                              "set")
    citation: ClassVar[str] = ("Least squares on real data, normalised as in Chaudhuri, "
                               "Monteleoni, Sarwate (JMLR 2011) and Iyengar et al. (IEEE S&P "
                               "2019); docs/datasets.md")
    version: ClassVar[str] = "1"
    task: ClassVar[str] = "regression"
    params: ClassVar[dict[str, Param]] = {
        **dataset_params("sklearn:diabetes"),
        "label_bound": Param(1.0, low=0.0, low_open=True,
                             doc="labels are scaled into [-label_bound, label_bound]"),
        "radius": Param(1.0, low=0.0, low_open=True, doc="radius R of the ball C (diameter 2R)"),
        "ridge": LAW_PARAMS["ridge"],
    }

    label_bound: float

    @property
    def label_size(self) -> float:
        """Every prepared label has |y| ≤ label_bound."""
        return self.label_bound

    def __dpbench_tags__(self) -> ProblemTags:
        """The squared loss's claims (rank-1 data Hessian, 2-dim gradient shifts)."""
        return SquaredLoss.__dpbench_tags__(self)
