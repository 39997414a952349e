"""pymc_crais: evidence (marginal likelihood) estimation for PyMC models by annealing.

Public API
----------
sample_ais
    Annealed importance sampling on a fixed or adaptive (ESS/CESS) schedule.
sample_crais
    Constant-rate AIS: a tuned schedule, then a fresh final run on it.
sample_rts
    Rao-Blackwellized tempered sampling (RTS), with thermodynamic integration from its draws.
sample_smc
    Tempered SMC (ESS, CESS, constant-rate = CR-SMC, fixed) with pm.sample_smc's signature.
CRSMC, BatchedSMC
    Drop-in kernels for ``pm.sample_smc(kernel=...)``.
log_marginal_likelihood
    Combine the chains of a result into ``(log Z, mcse)``.
diagnose, UnreliableEvidenceWarning
    The report of a run's diagnostics; the warning every run raises when its ``log Z`` or
    error bar cannot be trusted.
compare, bayes_factor
    Rank models by evidence; log Bayes factors and model probabilities with MC errors.
plot_schedule, plot_log_weights, plot_evidence
    Diagnostic plots (needs matplotlib).
"""

from . import datasets, models
from .comparison import ObservedDataMismatchError, bayes_factor, compare
from .core.anneal import WeightsVanishedError
from .core.initial import GaussianInitial, StudentTInitial
from .diagnostics import Diagnosis, diagnose
from .plots import plot_evidence, plot_log_weights, plot_schedule
from .pymc.compile import PerParticleFallbackWarning
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
from .pymc.term_checks import ImpossibleModelError
from .results import log_marginal_likelihood
from .warnings import ChainDisagreementWarning, UnreliableEvidenceWarning

__version__ = "0.1.0"

__all__ = [
    "CRSMC",
    "BatchedSMC",
    "ChainDisagreementWarning",
    "ChainFailedError",
    "Diagnosis",
    "GaussianInitial",
    "ImpossibleModelError",
    "ObservedDataMismatchError",
    "PerParticleFallbackWarning",
    "SamplerResult",
    "StudentTInitial",
    "UnreliableEvidenceWarning",
    "WeightsVanishedError",
    "__version__",
    "bayes_factor",
    "compare",
    "datasets",
    "diagnose",
    "log_marginal_likelihood",
    "models",
    "plot_evidence",
    "plot_log_weights",
    "plot_schedule",
    "sample_ais",
    "sample_crais",
    "sample_rts",
    "sample_smc",
    "schedule_from_result",
]
