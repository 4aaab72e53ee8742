"""Real data sets for dataset-backed problems: loaders, preparation, split (docs/datasets.md).

* :mod:`~dpbench.datasets.files`: CSV, NPZ and LIBSVM/svmlight parsers (numpy only);
* :mod:`~dpbench.datasets.bundled`: scikit-learn's bundled data sets (the optional ``datasets``
  extra);
* :mod:`~dpbench.datasets.prepare`: the held-out split, labels, feature scaling and row norms;
* :mod:`~dpbench.datasets.source`: data set names, relative paths, content digests, caching.

Part of the plugins layer; it imports :mod:`dpbench.core` only.
"""

from __future__ import annotations

from .bundled import BUNDLED, INSTALL, load_bundled
from .files import DatasetError, Table, read_csv, read_npz, read_svmlight
from .prepare import Prepared, prepare, split_rows
from .source import FILE_KINDS, KINDS, Loaded, Spec, identity, load, load_prepared, locate, parse

__all__ = ["BUNDLED", "FILE_KINDS", "INSTALL", "KINDS", "DatasetError", "Loaded", "Prepared",
           "Spec", "Table", "identity", "load", "load_bundled", "load_prepared", "locate",
           "parse", "prepare", "read_csv", "read_npz", "read_svmlight", "split_rows"]
