"""The NumPy core of pymc_crais: paths, schedules, kernels, resampling, weights and the
annealing loop. Nothing here imports PyMC, PyTensor or ArviZ."""

from .anneal import AnnealResult, WeightsVanishedError, anneal
from .density import BatchedDensity, Evaluation, FunctionDensity
from .kernels import HMC, MutationKernel, RandomWalkMetropolis, make_kernel
from .particles import ParticleState
from .paths import AnnealingPath, GeometricPath, PowerMeanPath, make_path
from .schedules import FixedSchedule, Schedule, make_fixed_schedule, validate_schedule

__all__ = [
    "HMC",
    "AnnealResult",
    "AnnealingPath",
    "BatchedDensity",
    "Evaluation",
    "FixedSchedule",
    "FunctionDensity",
    "GeometricPath",
    "MutationKernel",
    "ParticleState",
    "PowerMeanPath",
    "RandomWalkMetropolis",
    "Schedule",
    "WeightsVanishedError",
    "anneal",
    "make_fixed_schedule",
    "make_kernel",
    "make_path",
    "validate_schedule",
]
