"""The ``ds.dpbench`` xarray accessor: analysis methods on an experiment's cube.

Registered when :mod:`dpbench.analysis` is imported (``import dpbench`` alone stays light):

>>> import dpbench.analysis
>>> ds = xr.open_zarr("results/quickstart.zarr", group="lipschitz", consolidated=False)
>>> ds.dpbench.fit_rates()           # list of RateFit
>>> ds.dpbench.fits_frame()          # the same as a pandas DataFrame
>>> ds.dpbench.to_dataframe()        # the cube itself, one row per cell (dpbench export)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import xarray as xr

from . import compare, export, rates

if TYPE_CHECKING:
    import pandas as pd


@xr.register_dataset_accessor("dpbench")
class DpbenchAccessor:
    def __init__(self, ds: xr.Dataset) -> None:
        self._ds = ds

    def fit_rates(self, **kwargs: Any) -> list[rates.RateFit]:
        """:func:`dpbench.analysis.fit_rates` on this cube."""
        return rates.fit_rates(self._ds.load(), **kwargs)

    def fits_frame(self, **kwargs: Any) -> Any:
        return rates.fits_frame(self.fit_rates(**kwargs))

    def paired_comparisons(self, **kwargs: Any) -> list[compare.Comparison]:
        return compare.paired_comparisons(self._ds.load(), **kwargs)

    def crossovers(self) -> list[compare.Crossover]:
        return compare.crossovers(self._ds.load())

    def collapse_check(self, **kwargs: Any) -> list[compare.CollapseCheck]:
        return compare.collapse_check(self._ds.load(), **kwargs)

    def epsilon_convergence(self) -> list[compare.EpsilonConvergence]:
        return compare.epsilon_convergence(self._ds.load())

    def to_dataframe(self, experiment: str | None = None) -> pd.DataFrame:
        """This cube as a tidy pandas DataFrame, one row per cell (pending and failed cells
        included): the columns of ``dpbench export``
        (:func:`dpbench.analysis.export.experiment_frame`). ``experiment`` overrides the name
        taken from the cube's attributes."""
        return export.experiment_frame(self._ds, experiment)
