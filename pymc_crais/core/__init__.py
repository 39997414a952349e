"""The NumPy core of pymc_crais: paths, schedules, kernels, moves, resampling, weights,
estimators, the annealing loop and tempered sampling. Nothing here imports PyMC, PyTensor
or ArviZ."""

from .anneal import AnnealOptions, AnnealResult, WeightsVanishedError, anneal
from .density import BatchedDensity, Evaluation, FunctionDensity
from .kernels import (
    HMC,
    MALA,
    IMHThenHMC,
    IndependentMetropolis,
    LevelParams,
    MutationKernel,
    RandomWalkMetropolis,
    make_kernel,
)
from .kernels.moves import CorrelationStop, Moves
from .particles import ParticleState
from .paths import AnnealingPath, ArrayTauPath, GeometricPath, PowerMeanPath, make_path
from .resampling import ResamplingPolicy
from .rts import RTSOptions, RTSResult, rts
from .schedules import FixedSchedule, Schedule, make_fixed_schedule, validate_schedule

__all__ = [
    "HMC",
    "MALA",
    "AnnealOptions",
    "AnnealResult",
    "AnnealingPath",
    "ArrayTauPath",
    "BatchedDensity",
    "CorrelationStop",
    "Evaluation",
    "FixedSchedule",
    "FunctionDensity",
    "GeometricPath",
    "IMHThenHMC",
    "IndependentMetropolis",
    "LevelParams",
    "Moves",
    "MutationKernel",
    "ParticleState",
    "PowerMeanPath",
    "RTSOptions",
    "RTSResult",
    "RandomWalkMetropolis",
    "ResamplingPolicy",
    "Schedule",
    "WeightsVanishedError",
    "anneal",
    "make_fixed_schedule",
    "make_kernel",
    "make_path",
    "rts",
    "validate_schedule",
]
