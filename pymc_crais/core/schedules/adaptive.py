"""Schedules that choose the next τ from the current population (docs/algorithms.md,
"Schedules" and "Constant-rate AIS").

All three work only with cached per-particle values (``Δ`` and the current log-weights),
so choosing a step costs no model evaluation, and each solves on exactly the increment
``path.log_increment(τ, τ', Δ)`` the annealing loop then applies.

* :class:`ESSSchedule`: the largest τ' with ``ESS(W · incr) ≥ ρ · ESS(W)`` (after a
  resampling ``ESS(W) = N``, which is the SMC rule ``ESS(incr) ≥ ρN``);
* :class:`CESSSchedule`: the largest τ' with conditional ESS ``≥ ρN``;
* :class:`ConstantRateSchedule`: CR-AIS, a constant decrease of the α-divergence per step.

Names: ``max_dtau`` / ``min_dtau`` bound one step ``Δτ = τ' − τ`` (old names ``max_step`` /
``min_step``, still accepted, and still the keys of :meth:`describe` and the public
arguments of the samplers); the constant-rate schedule's rate δ is ``rate`` (old keyword
``delta``, which in the core means the cached log-ratio ``Δ = log π̃ − log q0``).
"""

from __future__ import annotations

import numpy as np

from ..weights import clean_log_weights, logsumexp
from .fixed import Schedule

__all__ = ["CESSSchedule", "ConstantRateSchedule", "ESSSchedule", "bisect_step", "rate_statistics"]


def _check_rho(rho: float, name: str = "rho") -> float:
    if not (np.isfinite(rho) and 0.0 < rho < 1.0):
        raise ValueError(f"{name} must be in (0, 1), got {rho!r}")
    return float(rho)


_UNSET = object()


def _alias(name: str, value, old_name: str, old_value, default):
    """``(value, the name the caller used)`` for an argument with an old keyword name."""
    if old_value is not _UNSET:
        if value is not _UNSET:
            raise TypeError(f"pass {name} or its old name {old_name}, not both")
        return old_value, old_name
    return (default if value is _UNSET else value), name


def _check_dtau_bounds(min_dtau, max_dtau, names=("min_dtau", "max_dtau")) -> tuple[float, float]:
    """``(min Δτ, max Δτ)`` with ``None`` read as 0 and 1; errors name the caller's keywords."""
    lo_name, hi_name = names
    lo = 0.0 if min_dtau is None else float(min_dtau)
    hi = 1.0 if max_dtau is None else float(max_dtau)
    if not (0.0 <= lo < 1.0):
        raise ValueError(f"{lo_name} must be in [0, 1), got {min_dtau!r}")
    if not (0.0 < hi <= 1.0):
        raise ValueError(f"{hi_name} must be in (0, 1], got {max_dtau!r}")
    if lo > hi:
        raise ValueError(f"{lo_name} ({lo}) must not exceed {hi_name} ({hi})")
    return lo, hi


def _log_ess(log_w: np.ndarray) -> float:
    """log of (Σw)² / Σw² (−inf when all weights vanish)."""
    total = logsumexp(log_w)
    if not np.isfinite(total):
        return -np.inf
    return 2.0 * total - logsumexp(2.0 * log_w)


def bisect_step(ok, tau: float, min_dtau: float, max_dtau: float, tol: float) -> float:
    """The largest τ' in ``(τ, min(1, τ + max_dtau)]`` with ``ok(τ')`` (``ok`` true for
    small steps and false beyond some step), searched on ``log(τ' − τ)`` to relative
    precision ``tol``; ``τ + min_dtau`` (or the smallest step tried) when not even that is
    acceptable."""
    hi_tau = min(1.0, tau + max_dtau)
    if ok(hi_tau):
        return hi_tau
    lo = np.log(max(1e-300, min_dtau if min_dtau > 0 else 1e-14 * max(1.0 - tau, 1e-300)))
    hi = np.log(hi_tau - tau)
    if lo >= hi or not ok(tau + np.exp(lo)):
        return min(1.0, tau + max(min_dtau, np.exp(lo)))
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if ok(tau + np.exp(mid)):
            lo = mid
        else:
            hi = mid
    return min(1.0, tau + np.exp(lo))


class _BisectionSchedule(Schedule):
    """Largest τ' in ``(τ, min(1, τ + max_dtau)]`` whose criterion stays ≥ 0.

    The criterion is decreasing in τ' for the increments of a path. The search runs on
    ``log(τ' − τ)`` so that the tiny first steps of a wide prior (10⁻⁶ and below) are
    resolved as precisely as large ones; ``tol`` is the relative precision of the step.
    """

    def __init__(
        self,
        rho: float,
        max_dtau: float | None = _UNSET,
        min_dtau: float | None = _UNSET,
        tol: float = 1e-8,
        *,
        max_step: float | None = _UNSET,
        min_step: float | None = _UNSET,
    ):
        self.rho = _check_rho(rho)
        hi, hi_name = _alias("max_dtau", max_dtau, "max_step", max_step, None)
        lo, lo_name = _alias("min_dtau", min_dtau, "min_step", min_step, None)
        self.min_dtau, self.max_dtau = _check_dtau_bounds(lo, hi, (lo_name, hi_name))
        self.tol = float(tol)

    def reference(self, log_w: np.ndarray):
        """What :meth:`criterion` needs of ``log_w`` alone, computed once per bisection."""
        raise NotImplementedError

    def criterion(self, log_w: np.ndarray, incr: np.ndarray, ref) -> float:
        """Non-negative while the step whose log-increments are ``incr`` is acceptable;
        ``ref`` is :meth:`reference` of ``log_w``."""
        raise NotImplementedError

    def next_tau(self, stage, tau, state, log_weights, path) -> float:
        log_w = clean_log_weights(log_weights)
        ref = self.reference(log_w)

        def ok(t):
            return self.criterion(log_w, path.state_log_increment(tau, t, state), ref) >= 0.0

        return bisect_step(ok, tau, self.min_dtau, self.max_dtau, self.tol)

    def describe(self) -> dict:
        # the public (sampler argument) names
        return {"schedule": self.name, "rho": self.rho, "max_step": self.max_dtau, "min_step": self.min_dtau}


class ESSSchedule(_BisectionSchedule):
    """ESS rule: ``ESS(W · exp(incr)) = ρ · ESS(W)`` (SMC after resampling: ``= ρN``).

    Parameters
    ----------
    rho : float
        Target ratio in (0, 1) (PyMC's SMC uses 0.5).
    max_dtau, min_dtau : float, optional
        Bounds on ``τ' − τ`` (old names ``max_step``, ``min_step`` accepted).
    """

    name = "ess"

    def reference(self, log_w):
        return np.log(self.rho) + _log_ess(log_w)

    def criterion(self, log_w, incr, ref):
        return _log_ess(log_w + incr) - ref


class CESSSchedule(_BisectionSchedule):
    """Conditional ESS rule (Zhou, Johansen & Aston 2016): ``CESS = ρN`` with
    ``CESS = N (Σ W_j i_j)² / Σ W_j i_j²``, ``W`` normalized and ``i = exp(incr)``.
    """

    name = "cess"

    def reference(self, log_w):
        return log_w - logsumexp(log_w)

    def criterion(self, log_w, incr, ref):
        # ref: the normalized log-weights
        n = log_w.size
        log_cess = np.log(n) + 2.0 * logsumexp(ref + incr) - logsumexp(ref + 2.0 * incr)
        if not np.isfinite(log_cess):
            return -np.inf
        return log_cess - np.log(self.rho * n)


def rate_statistics(delta, log_weights, tau: float, path, weighted: bool) -> tuple[float, float]:
    """The constant-rate rule's ``(v, log r)`` at τ from a population ``(Δ, log W)``.

    ``a = (Δ − c) − h(τ, Δ)``, ``log r = log Σ W e^a − log Σ W`` (``Z_π / Z_τ``),
    ``g = (e^{α(a − log r)} − 1)/α`` (``a − log r`` for α = 0) and ``v`` its variance, under
    the normalized weights if ``weighted`` else over the particles. Fewer than two usable
    particles give ``(0, 0)``.
    """
    delta = np.asarray(delta, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        a = (delta - path.c) - path.log_ratio(tau, delta)
    log_w = clean_log_weights(log_weights)
    valid = np.isfinite(a) & np.isfinite(log_w)
    if valid.sum() < 2:
        return 0.0, 0.0
    a, log_w = a[valid], log_w[valid]
    log_r = logsumexp(log_w + a) - logsumexp(log_w)
    z = a - log_r
    alpha = path.alpha
    g = z if alpha == 0.0 else np.expm1(np.minimum(alpha * z, 700.0)) / alpha
    with np.errstate(over="ignore", invalid="ignore"):
        if weighted:
            w = np.exp(log_w - logsumexp(log_w))
            mean = np.dot(w, g)
            v = float(np.dot(w, (g - mean) ** 2))
        else:
            v = float(np.var(g))
    if not np.isfinite(v) and alpha != 0.0:
        v = _log_space_variance(alpha * z, log_w if weighted else np.zeros_like(z), alpha)
    return v, float(log_r)


def _log_space_variance(x, log_w, alpha) -> float:
    """``Var_W[(e^x − 1)/α] = (E[e^{2x}] − E[e^x]²)/α²`` without forming ``e^{2x}``: the
    variance when ``g²`` overflows although the weighted sum does not (a weighted pool
    whose far particles carry tiny weights). ``inf`` only if the variance itself does."""
    log_w = log_w - logsumexp(log_w)
    l1, l2 = logsumexp(log_w + x), logsumexp(log_w + 2.0 * x)
    gap = min(2.0 * l1 - l2, 0.0)  # ≤ 0 by Jensen, up to rounding
    log_v = l2 + np.log(-np.expm1(gap)) - 2.0 * np.log(abs(alpha)) if gap < 0 else -np.inf
    with np.errstate(over="ignore"):
        return float(np.exp(log_v))


class ConstantRateSchedule(Schedule):
    """CR-AIS (Goshtasbpour et al. 2023, Algorithm 1) for a power-mean path of any α.

    At stage ``i`` (τ, β = 1 − τ), from the cached ``Δ`` of the current particles and their
    log-weights ``log W``:

    1. ``a_j = (Δ_j − c) − h(τ, Δ_j)``  (``log π̃_c − log γ_τ``);
    2. ``log r = logsumexp(log W + a) − logsumexp(log W)``;
    3. ``g(u) = (u^α − 1)/α`` (``log u`` for α = 0) with ``u = exp(a − log r)``;
    4. ``v`` = variance of ``g(u)`` (``variance="weighted"``: under the normalized weights;
       ``"unweighted"``: plain variance over the particles, as the authors' code);
    5. ``log β' = log β − δ / (v · r^α)``, the step clipped to ``[min_dtau, max_dtau]``;
       the schedule ends at τ = 1 once ``v < v_min``; a non-finite ``v`` (overflow)
       gives the smallest step (``min_dtau``, or the smallest representable one).

    Parameters
    ----------
    rate : float
        The rate δ > 0; the number of steps is roughly proportional to 1/δ. (Old keyword
        ``delta``, still accepted.)
    variance : {"unweighted", "weighted"}, default "unweighted"
    min_dtau, max_dtau : float, default 0 and 1/8
        Bounds on ``τ' − τ`` (old names ``min_step``, ``max_step`` accepted).
    v_min : float, default 1e-3
    reference : RateReference, optional
        A fixed weighted population whose re-weighting to ``γ_τ`` gives ``v`` and ``r``
        instead of the current particles (weighted variance; ``variance`` is then unused).
        For α ≠ 0 the current particles of a target much narrower than ``q0`` carry none of
        the mass that ``γ_τ`` puts near the target, so their ``r`` is off by hundreds of
        nats and every step hits ``max_dtau``; a geometric pilot's stages, pooled
        (:class:`~pymc_crais.core.schedules.rate_reference.RateReference`), do see that mass.
    cess_floor : float, optional
        A floor ρ in (0, 1) under each step: never a smaller step than the conditional-ESS
        rule's (:class:`CESSSchedule` with this ρ). Where the particles' log-likelihoods
        spread over orders of magnitude (a funnel, started from the prior) ``v`` is huge and
        the rule's steps shrink to ~1e-9 while the weights barely change: CR-SMC crawled
        600 stages below τ = 5e-6 on the centred eight schools. With a floor each
        step changes the weights at least as much as one that keeps that share of the
        conditional ESS (CR-SMC: 0.999; 40 stages there).
    """

    name = "constant_rate"

    def __init__(
        self,
        rate: float = _UNSET,
        variance: str = "unweighted",
        min_dtau: float | None = _UNSET,
        max_dtau: float | None = _UNSET,
        v_min: float = 1e-3,
        *,
        reference=None,
        cess_floor: float | None = None,
        delta: float = _UNSET,
        min_step: float | None = _UNSET,
        max_step: float | None = _UNSET,
    ):
        rate, rate_name = _alias("rate", rate, "delta", delta, _UNSET)
        if rate is _UNSET:
            raise TypeError("ConstantRateSchedule needs the rate (e.g. ConstantRateSchedule(0.1))")
        if not (np.isfinite(rate) and rate > 0):
            raise ValueError(f"{rate_name} must be positive and finite, got {rate!r}")
        if variance not in ("weighted", "unweighted"):
            raise ValueError(f"variance must be 'weighted' or 'unweighted', got {variance!r}")
        if not (np.isfinite(v_min) and v_min >= 0):
            raise ValueError(f"v_min must be >= 0, got {v_min!r}")
        self.rate = float(rate)
        self.variance = variance
        hi, hi_name = _alias("max_dtau", max_dtau, "max_step", max_step, 0.125)
        lo, lo_name = _alias("min_dtau", min_dtau, "min_step", min_step, 0.0)
        self.min_dtau, self.max_dtau = _check_dtau_bounds(lo, hi, (lo_name, hi_name))
        self.v_min = float(v_min)
        if reference is not None and not (hasattr(reference, "delta") and hasattr(reference, "log_weights")):
            raise TypeError(
                "reference must be a RateReference (pymc_crais.core.schedules.rate_reference), "
                f"got {type(reference).__name__}"
            )
        self.reference = reference
        self.cess_floor = None if cess_floor is None else _check_rho(cess_floor, "cess_floor")
        self._floor = None if cess_floor is None else CESSSchedule(cess_floor, max_dtau=self.max_dtau)
        self.last_v = np.nan  # objective of the most recent step (diagnostics)

    def rate_statistics(self, tau: float, state, log_weights, path) -> tuple[float, float]:
        """``(v, log r)`` at τ (no model evaluation): from the current population, or from
        the :attr:`reference` population re-weighted to ``γ_τ`` when there is one."""
        if self.reference is not None:
            return rate_statistics(
                self.reference.delta, self.reference.log_weights(tau, path), tau, path, True
            )
        return rate_statistics(
            state.delta, log_weights, tau, path, self.variance == "weighted"
        )

    def next_tau(self, stage, tau, state, log_weights, path) -> float:
        v, log_r = self.rate_statistics(tau, state, log_weights, path)
        self.last_v = v
        if np.isfinite(v) and v < self.v_min:
            return 1.0
        # an overflowing variance (v = inf, e.g. α < 0 far from the target) means the rule's
        # step is zero: take the smallest step allowed, never a jump to the end
        v_r = v * np.exp(min(path.alpha * log_r, 700.0)) if np.isfinite(v) else np.inf
        log_beta = np.log1p(-tau) - self.rate / max(v_r, 1e-300)
        tau_new = -np.expm1(log_beta)
        step = min(max(tau_new - tau, self.min_dtau), self.max_dtau)
        step = max(step, 4.0 * np.spacing(tau) if tau > 0 else 1e-300)  # representable progress
        tau_new = tau + step
        if self._floor is not None:
            tau_new = max(tau_new, self._floor.next_tau(stage, tau, state, log_weights, path))
        # within 1e-10 of the end the remaining path is negligible: finish rather than
        # creating steps that round to nothing
        return 1.0 if tau_new > 1.0 - 1e-10 else float(tau_new)

    def describe(self) -> dict:
        # the public (sampler argument) names
        return {
            "schedule": self.name,
            "delta": self.rate,
            "variance": self.variance,
            "min_step": self.min_dtau,
            "max_step": self.max_dtau,
            "v_min": self.v_min,
            "rate_statistics": "reference" if self.reference is not None else "particles",
            "cess_floor": float("nan") if self.cess_floor is None else self.cess_floor,
        }
