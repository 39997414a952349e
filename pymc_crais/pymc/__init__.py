"""The PyMC layer: batched compilation, prior draws, named variables, entry points."""

from .compile import ModelDensity, PerParticleFallbackWarning, compile_model_density
from .init import PriorSampler
from .mapping import PosteriorMapper
from .sampling import ChainFailedError, SamplerResult, sample_ais

__all__ = [
    "ChainFailedError",
    "ModelDensity",
    "PerParticleFallbackWarning",
    "PosteriorMapper",
    "PriorSampler",
    "SamplerResult",
    "compile_model_density",
    "sample_ais",
]
