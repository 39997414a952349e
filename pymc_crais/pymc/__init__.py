"""The PyMC layer: batched compilation, prior draws, named variables, entry points."""

from .compile import ModelDensity, PerParticleFallbackWarning, compile_model_density
from .init import PriorSampler
from .mapping import PosteriorMapper
from .rts import sample_rts
from .sampling import ChainFailedError, SamplerResult, sample_ais, sample_crais
from .smc import sample_smc

__all__ = [
    "ChainFailedError",
    "ModelDensity",
    "PerParticleFallbackWarning",
    "PosteriorMapper",
    "PriorSampler",
    "SamplerResult",
    "compile_model_density",
    "sample_ais",
    "sample_crais",
    "sample_rts",
    "sample_smc",
]
