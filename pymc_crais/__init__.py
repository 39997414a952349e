"""pymc_crais: evidence (marginal likelihood) estimation for PyMC models by annealing.

Public API
----------
sample_ais
    Annealed importance sampling on a fixed or adaptive (ESS/CESS) schedule.
sample_crais
    Constant-rate AIS: a tuned schedule, then a fresh final run on it.
sample_rts
    Rao-Blackwellized tempered sampling (RTS), with thermodynamic integration from its draws.
sample_mcd
    Learned unadjusted annealing: Monte Carlo Diffusion, ULA or UHA AIS.
sample_smc
    Tempered SMC (ESS, CESS, constant-rate = CR-SMC, fixed) with pm.sample_smc's signature.
CRSMC, BatchedSMC
    Drop-in kernels for ``pm.sample_smc(kernel=...)``.
log_marginal_likelihood
    Combine the chains of a result into ``(log Z, mcse)``.
compare, bayes_factor
    Rank models by evidence; log Bayes factors and model probabilities with MC errors.
plot_schedule, plot_log_weights, plot_evidence
    Diagnostic plots (needs matplotlib).
"""

from . import datasets, models
from .comparison import ObservedDataMismatchError, bayes_factor, compare
from .core.anneal import WeightsVanishedError
from .core.initial import GaussianInitial, StudentTInitial
from .plots import plot_evidence, plot_log_weights, plot_schedule
from .pymc.compile import PerParticleFallbackWarning
from .pymc.mcd import sample_mcd
from .pymc.rts import sample_rts
from .pymc.sampling import (
    ChainFailedError,
    SamplerResult,
    sample_ais,
    sample_crais,
    schedule_from_result,
)
from .pymc.smc import sample_smc
from .pymc.smc_kernels import CRSMC, BatchedSMC
from .results import ChainDisagreementWarning, log_marginal_likelihood

__version__ = "0.1.0"

__all__ = [
    "CRSMC",
    "BatchedSMC",
    "ChainDisagreementWarning",
    "ChainFailedError",
    "GaussianInitial",
    "ObservedDataMismatchError",
    "PerParticleFallbackWarning",
    "StudentTInitial",
    "SamplerResult",
    "WeightsVanishedError",
    "__version__",
    "bayes_factor",
    "compare",
    "datasets",
    "models",
    "plot_evidence",
    "plot_log_weights",
    "plot_schedule",
    "log_marginal_likelihood",
    "sample_ais",
    "sample_crais",
    "sample_mcd",
    "sample_rts",
    "sample_smc",
    "schedule_from_result",
]
