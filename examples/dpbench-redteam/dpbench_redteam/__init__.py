"""A red team for dpbench's privacy auditor: one correct mechanism (the Gaussian mechanism on the
clipped mean), correct controls, and deliberately broken copies, each with its analytic true ε."""

from .mechanisms import (
    LEAK_PROBABILITY,
    RUN_ONLY,
    VARIANTS,
    RedTeamConstantSeed,
    RedTeamDataStart,
    RedTeamGaussian,
    RedTeamLaplace,
    RedTeamLaplaceHalf,
    RedTeamNoClipping,
    RedTeamRowLeak,
    RedTeamSensitivityLOverN,
    RedTeamSigma2,
    RedTeamSigma4,
    RedTeamSigma15,
    RedTeamSigma125,
    RedTeamUniformRowLeak,
    gdp_to_epsilon,
)

__all__ = [
    "LEAK_PROBABILITY", "RUN_ONLY", "VARIANTS", "RedTeamConstantSeed", "RedTeamDataStart", "RedTeamGaussian",
    "RedTeamLaplace", "RedTeamLaplaceHalf", "RedTeamNoClipping", "RedTeamRowLeak",
    "RedTeamSensitivityLOverN", "RedTeamSigma2", "RedTeamSigma4", "RedTeamSigma15",
    "RedTeamSigma125", "RedTeamUniformRowLeak", "gdp_to_epsilon",
]
