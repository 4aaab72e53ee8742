"""scikit-learn's bundled data sets (no download): ``sklearn:<name>`` (docs/datasets.md).

scikit-learn is an optional dependency (the ``datasets`` extra); it is imported only when such a
data set is asked for, and its absence is a :class:`~dpbench.datasets.files.DatasetError` that says
how to install it.
"""

from __future__ import annotations

import numpy as np

from ..core.errors import did_you_mean
from .files import DatasetError, Table

__all__ = ["BUNDLED", "INSTALL", "load_bundled"]

#: The bundled data sets by name: (what it is, its task).
BUNDLED: dict[str, str] = {
    "breast_cancer": "Wisconsin diagnostic breast cancer: 569 rows, 30 features, 2 classes",
    "digits": "8x8 handwritten digits: 1797 rows, 64 features, 10 classes (needs positive)",
    "wine": "wine recognition: 178 rows, 13 features, 3 classes (needs positive)",
    "diabetes": "diabetes progression: 442 rows, 10 features, a real-valued target",
    "iris": "iris flowers: 150 rows, 4 features, 3 classes (needs positive)",
}

INSTALL = "pip install 'dp-ratebench[datasets]'"


def load_bundled(name: str) -> Table:
    """The bundled data set ``name`` as a :class:`Table` (features float64, labels as given)."""
    if name not in BUNDLED:
        raise DatasetError("dataset", f"unknown scikit-learn data set {name!r}"
                                      f"{did_you_mean(name, BUNDLED)}; available: "
                                      f"{', '.join(f'sklearn:{k}' for k in BUNDLED)}")
    try:
        from sklearn import datasets
    except ImportError:
        raise DatasetError("dataset", f"'sklearn:{name}' needs scikit-learn, which is not "
                                      f"installed: {INSTALL}") from None
    bunch = getattr(datasets, f"load_{name}")()
    X = np.ascontiguousarray(bunch.data, dtype=float)
    y = np.asarray(bunch.target)
    y = y.astype(float) if y.dtype.kind in "biuf" else y.astype(str)
    names = getattr(bunch, "feature_names", None)
    columns = tuple(str(c) for c in names) if names is not None else tuple(
        str(j) for j in range(X.shape[1]))
    return Table(X, y, columns, "target")
