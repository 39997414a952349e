"""pymc_crais: evidence (marginal likelihood) estimation for PyMC models by annealing.

Public API
----------
sample_ais
    Annealed importance sampling from the prior on a fixed schedule, batched kernels.
log_marginal_likelihood
    Combine the chains of a result into ``(log Z, mcse)``.
"""

from .core.anneal import WeightsVanishedError
from .pymc.compile import PerParticleFallbackWarning
from .pymc.sampling import ChainFailedError, SamplerResult, sample_ais
from .results import log_marginal_likelihood

__version__ = "0.1.0"

__all__ = [
    "ChainFailedError",
    "PerParticleFallbackWarning",
    "SamplerResult",
    "WeightsVanishedError",
    "__version__",
    "log_marginal_likelihood",
    "sample_ais",
]
