"""pymc_crais: evidence (marginal likelihood) estimation for PyMC models by annealing.

Start with ``pmc.sample_smc()`` and no options. On the validation suite, at the seeds
checked on the current code, its defaults are right or flagged on every model, and it is
the fastest sampler here (docs/choosing.md, "Choosing a sampler").

Public API
----------
sample_smc
    Tempered SMC (ESS, CESS, constant-rate = CR-SMC, fixed) with pm.sample_smc's signature;
    the default choice.
sample_ais
    Annealed importance sampling on a fixed or adaptive (ESS/CESS) schedule.
sample_crais
    Constant-rate AIS: a tuned schedule, then a fresh final run on it.
sample_rts
    Rao-Blackwellized tempered sampling (RTS), with thermodynamic integration from its draws.
sample_mcd
    Learned unadjusted annealing: Monte Carlo Diffusion, ULA or UHA AIS.
CRAIS, CRSMC, BatchedSMC
    Drop-in kernels for ``pm.sample_smc(kernel=...)`` (CR-AIS, CR-SMC, ESS tempering).
log_marginal_likelihood
    Combine the chains of a result into ``(log Z, mcse)``.
diagnose, UnreliableEvidenceWarning
    The report of a run's diagnostics; the warning every run raises when its ``log Z`` or
    error bar cannot be trusted.
compare, bayes_factor
    Rank models by evidence; log Bayes factors and model probabilities with MC errors.
bridge_sampling
    ``log Z`` from the posterior draws a ``pm.sample()`` (NUTS) result already has.
cross_check
    Whether two estimates of one model's evidence agree within their errors, and which to
    trust when they do not.
fit_many
    One sampler on many models, each a task of an executor (local processes, a Dask
    cluster); its results go to ``compare``.
plot_schedule, plot_log_weights, plot_evidence
    Diagnostic plots (needs matplotlib).
"""

from . import datasets, models
from . import warnings as warnings  # the warning classes, pymc_crais.warnings
from .chain_result import SamplerResult, schedule_from_result
from .comparison import ObservedDataMismatchError, bayes_factor, compare
from .core.anneal import WeightsVanishedError
from .core.initial import GaussianInitial, StudentTInitial
from .cross_check import CrossCheck, cross_check
from .diagnostics import Diagnosis, diagnose
from .plots import plot_evidence, plot_log_weights, plot_schedule
from .results import log_marginal_likelihood
from .samplers.ais import sample_ais
from .samplers.bridge import bridge_sampling
from .samplers.crais import sample_crais
from .samplers.engine.compile import PerParticleFallbackWarning
from .samplers.engine.runner import ChainFailedError
from .samplers.engine.term_checks import ImpossibleModelError
from .samplers.many import fit_many
from .samplers.mcd import sample_mcd
from .samplers.rts import sample_rts
from .samplers.smc import sample_smc
from .samplers.smc_kernels import CRAIS, CRSMC, BatchedSMC
from .warnings import ChainDisagreementWarning, UnreliableEvidenceWarning

__version__ = "0.1.0"

__all__ = [
    "CRAIS",
    "CRSMC",
    "BatchedSMC",
    "ChainDisagreementWarning",
    "ChainFailedError",
    "CrossCheck",
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
    "bridge_sampling",
    "compare",
    "cross_check",
    "datasets",
    "diagnose",
    "fit_many",
    "log_marginal_likelihood",
    "models",
    "plot_evidence",
    "plot_log_weights",
    "plot_schedule",
    "sample_ais",
    "sample_crais",
    "sample_mcd",
    "sample_rts",
    "sample_smc",
    "schedule_from_result",
]
