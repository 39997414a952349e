"""Rao-Blackwellized tempered sampling (RTS) and thermodynamic integration.

Simulated tempering over a ladder ``0 = τ_1 < … < τ_K = 1`` of one annealing path
(docs/algorithms.md, "Rao-Blackwellized tempered sampling and thermodynamic integration";
Carlson et al. 2016): the state of each of ``N`` particles is a pair ``(θ, k)``, updated by
Gibbs steps

* ``θ | k``: a mutation kernel invariant for ``γ_{τ_k}``, with the kernel's own per-level
  parameters (:class:`~pymc_crais.core.kernels.LevelParams`); all particles move in one
  batched call although they sit at different temperatures
  (:class:`~pymc_crais.core.paths.ArrayTauPath`);
* ``k | θ``: an exact draw from ``q(k | θ) ∝ r_k γ_k(θ) / Ẑ_k`` over all ``K`` levels.

The Rao-Blackwellized statistics ``ĉ_k`` (the average over draws of ``q(k | θ)``) estimate
the marginal ``q(k) ∝ r_k Z_k / Ẑ_k``, so ``Z_k / Z_1 = (Ẑ_k r_1 ĉ_k) / (Ẑ_1 r_k ĉ_1)``.
An initial loop of short rounds refines ``log Ẑ_k`` by that rule until ``ĉ`` is close to
``r``; a final run with ``Ẑ`` and the kernel parameters frozen gives the estimate. The same
draws give thermodynamic integration, ``log Z = ∫ E_τ[∂_τ log γ_τ] dτ`` by the trapezoid
rule, with the level means either from the draws at each level (plain TI) or weighted by
``q(k | θ)`` over all draws (RB-TI). Since ``q0`` is normalized, ``Z_1 = 1`` and
``log Z = log Z_K`` (plus the path's shift ``c``).

Modules: :mod:`.options` (:class:`RTSOptions`), :mod:`.run` (result, :func:`rts`), :mod:`.warmup` (start and initial
rounds), :mod:`.final` (the frozen final run), :mod:`.levels` (``q(k | θ)``, the sweep).
Nothing here imports PyMC.
"""

from ..estimators import rts_update, trapezoid
from ..kernels import LevelParams
from ..paths import ArrayTauPath
from .levels import ladder_log_ratio, sample_levels, tau_derivative, temperature_log_conditional
from .options import WARM_STARTS, RTSOptions
from .run import RTSResult, rts

__all__ = [
    "WARM_STARTS",
    "ArrayTauPath",
    "LevelParams",
    "RTSOptions",
    "RTSResult",
    "ladder_log_ratio",
    "rts",
    "rts_update",
    "sample_levels",
    "tau_derivative",
    "temperature_log_conditional",
    "trapezoid",
]
