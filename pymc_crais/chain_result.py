"""What one chain hands to the results layer: a typed, frozen :class:`ChainResult`.

Every sampler turns its chains' output into ``ChainResult`` objects; the results layer
(:func:`pymc_crais.results.build_datatree`) turns a list of them into ArviZ data, or
:class:`SamplerResult` keeps them as plain NumPy (``return_inferencedata=False``). This module
imports neither a sampler nor PyMC.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "STAGE_KEYS",
    "ChainResult",
    "SamplerResult",
    "per_chain_arrays",
    "schedule_from_result",
]

STAGE_KEYS = ("tau", "ess", "acceptance_rate", "log_z_increment", "mcmc_steps", "resampled")
"""The per-stage arrays every chain reports (``resampled`` is boolean, the others float)."""


@dataclass(frozen=True)
class ChainResult:
    """The output of one chain, as plain NumPy (small and picklable).

    Attributes
    ----------
    chain : int
        The chain's index.
    x : numpy.ndarray, shape (draws, d)
        Equal-weight posterior draws in the model's unconstrained coordinates.
    log_marginal_likelihood : float
        The chain's ``log Ẑ``.
    log_z_variance : float
        Its within-chain variance (the square of ``log_marginal_likelihood_mcse``).
    n_logp_evals : int
        Particle-evaluations of the model spent by the chain.
    log_weights : numpy.ndarray, shape (draws,)
        The final unnormalized log-weights.
    hit_max_steps : bool
        Whether a cap on the number of stages (or rounds) was reached.
    stages : mapping of str to numpy.ndarray
        The per-stage arrays :data:`STAGE_KEYS` (dim ``stage``).
    stats : mapping of str to scalar
        Further per-chain scalars of the method (e.g. ``n_eves``,
        ``log_marginal_likelihood_ti``); each becomes a ``(chain,)`` variable of
        ``sample_stats``.
    arrays : mapping of str to (dims, numpy.ndarray)
        Per-chain arrays with dims of their own (e.g. RTS's per-level estimates, dims
        ``("level",)``); each becomes a ``("chain", *dims)`` variable of ``sample_stats``.
    """

    chain: int
    x: np.ndarray
    log_marginal_likelihood: float
    log_z_variance: float
    n_logp_evals: int
    log_weights: np.ndarray
    hit_max_steps: bool
    stages: Mapping[str, np.ndarray]
    stats: Mapping[str, object] = field(default_factory=dict)
    arrays: Mapping[str, tuple] = field(default_factory=dict)

    def __post_init__(self):
        missing = [k for k in STAGE_KEYS if k not in self.stages]
        if missing:
            raise ValueError(f"ChainResult.stages lacks {missing}")

    @property
    def n_stages(self) -> int:
        """Number of stages the chain ran."""
        return int(np.asarray(self.stages["tau"]).size)

    def as_dict(self) -> dict:
        """The chain's statistics as one flat dict (without ``x``, ``chain`` and ``arrays``):
        the entries of :attr:`SamplerResult.chain_stats`."""
        return {
            "log_marginal_likelihood": self.log_marginal_likelihood,
            "log_z_variance": self.log_z_variance,
            "n_logp_evals": self.n_logp_evals,
            "log_weights": self.log_weights,
            "hit_max_steps": self.hit_max_steps,
            **self.stats,
            **self.stages,
        }


def per_chain_arrays(chains: list[ChainResult]) -> dict[str, tuple]:
    """The chains' :attr:`ChainResult.arrays` stacked: ``name -> (("chain", *dims), array)``."""
    if not chains:
        return {}
    out = {}
    for key, (dims, _) in chains[0].arrays.items():
        out[key] = (("chain", *dims), np.stack([np.asarray(c.arrays[key][1]) for c in chains]))
    return out


@dataclass
class SamplerResult:
    """Raw output when ``return_inferencedata=False``.

    Attributes
    ----------
    posterior : dict of numpy.ndarray
        ``name -> (chain, draw, *shape)`` equal-weight posterior draws.
    chain_stats : list of dict
        Per-chain statistics (:meth:`ChainResult.as_dict`).
    attrs : dict
        Run settings.
    extra_vars : dict
        Run-level ``name -> (dims, array)`` (e.g. the CR-AIS tuning schedule, RTS's
        per-level arrays with a ``chain`` dim).
    """

    posterior: dict
    chain_stats: list
    attrs: dict
    extra_vars: dict = field(default_factory=dict)


def schedule_from_result(result) -> np.ndarray:
    """The annealing schedule ``0 = τ_0 < … < τ_M = 1`` a previous run used.

    Parameters
    ----------
    result : xarray.DataTree or SamplerResult
        Output of :func:`pymc_crais.sample_ais` / :func:`pymc_crais.sample_crais` (chain 0's
        schedule).

    Returns
    -------
    numpy.ndarray
    """
    if isinstance(result, SamplerResult):
        tau = np.asarray(result.chain_stats[0]["tau"], dtype=np.float64)
    else:
        try:
            st = result["sample_stats"]
            n = int(st["n_stages"].values[0])
            tau = np.asarray(st["tau"].values[0, :n], dtype=np.float64)
        except KeyError:
            raise ValueError(
                "the result has no sample_stats.tau; pass a pymc_crais result"
            ) from None
    return np.concatenate([[0.0], tau])
