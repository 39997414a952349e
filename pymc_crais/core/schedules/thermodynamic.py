"""Thermodynamic-length schedules: place the annealing steps where the path moves fastest.

Under perfect transitions (every intermediate distribution sampled exactly and
independently), the expected AIS log weight falls short of ``log Z`` by the sum of the
divergences between neighbours, ``δ = Σ_k KL(p_k ‖ p_{k+1})`` (Grosse, Maddison &
Salakhutdinov 2013, seed 004). For small steps ``KL(p_τ ‖ p_{τ+h}) ≈ ½ h² G(τ)``, where
``G(τ)`` is the Fisher information of the one-parameter family ``τ ↦ p_τ``:

``G(τ) = Var_{p_τ}[∂_τ log γ_τ(θ)]``

(the score is ``∂_τ log γ_τ − ∂_τ log Z_τ`` and ``∂_τ log Z_τ = E_{p_τ}[∂_τ log γ_τ]``, so the
Fisher information is the variance of ``∂_τ log γ_τ``). Minimising ``½ Σ h_k² G(τ_k)`` at a
fixed number of steps ``K`` gives steps with equal *thermodynamic length*
``∫ √G dτ`` each, and the bias ``δ ≈ L² / (2K)`` with ``L = ∫_0^1 √G dτ``; a linear schedule
has ``δ ≈ (1 / 2K) ∫ G dτ ≥ L² / (2K)`` (Cauchy–Schwarz).

The score ``u_τ = ∂_τ log γ_τ`` of the package's paths (ALGORITHMS.md section 2):

* geometric (α = 0), ``log γ_τ = log q0 + τ Δ``: ``u_τ = Δ``, so ``G(τ) = Var_τ(Δ)``;
* power mean (α ≠ 0), ``log γ_τ = log q0 + (1/α) log((1 − τ) + τ r)`` with
  ``r = exp(α (Δ − c))``: ``u_τ = (r − 1) / (α ((1 − τ) + τ r))``, which tends to ``Δ − c`` as
  α → 0. Written with ``w = τ r / ((1 − τ) + τ r)`` (the path's gradient weight),
  ``u_τ = (w/τ − (1 − w)/(1 − τ)) / α``; :func:`path_score` evaluates it in log space.

For exponential-family knots (natural parameters ``η_j``, moments ``s_j``) the paper's
binned rule uses the exact segment cost ``F_j = ½ (η_{j+1} − η_j)ᵀ (s_{j+1} − s_j)`` and
allocates ``K_j ∝ √F_j`` steps to segment ``j`` (the Gaussian study,
``benchmarks/studies/moment_averaging.py``). On a general target only a pilot's estimates
of ``G`` on a grid of τ are available; :func:`thermodynamic_schedule` turns them into a
schedule.

NumPy only; nothing here knows about PyMC.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy.special import logsumexp

__all__ = [
    "fisher_metric",
    "path_score",
    "schedule_bias",
    "thermodynamic_schedule",
]


def _check_k(k, name: str = "n_steps") -> int:
    ok = isinstance(k, numbers.Integral) and not isinstance(k, bool)
    if not ok or k < 1:
        raise ValueError(f"{name} must be a positive integer, got {k!r}")
    return int(k)


def _check_grid(tau, name: str) -> np.ndarray:
    t = np.asarray(tau, dtype=float)
    if t.ndim != 1 or t.size < 2:
        raise ValueError(f"{name} must be a 1-D array of at least two values")
    if not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0):
        raise ValueError(f"{name} must be finite and strictly increasing")
    if t[0] != 0.0 or t[-1] != 1.0:
        raise ValueError(f"{name} must start at 0 and end at 1, got {t[0]} … {t[-1]}")
    return t


def thermodynamic_schedule(tau, metric, n_steps: int, *, floor: float = 1e-3) -> np.ndarray:
    """Schedule of ``n_steps`` steps of equal thermodynamic length from a pilot's metric.

    The pilot's estimates ``G(τ_i)`` (e.g. :func:`fisher_metric` of the particles it held
    at ``τ_i``) are averaged over each grid interval (trapezoid rule, as the paper's segment
    cost ``F_j = ½ Δτ_j Δs_j`` with ``Δs_j = ∫ G``), so the metric is piecewise constant and
    the cumulative length ``ℓ(τ) = ∫_0^τ √G`` piecewise linear; the schedule is
    ``τ_k = ℓ⁻¹(k L / K)``. Within a grid interval the steps are therefore evenly spaced, with
    a density ∝ ``√Ḡ_j``: the optimal binned schedule of seed 004 with the grid intervals as
    bins, with fractional ``K_j`` so that any ``K`` works (a bin may get less than one step).

    Parameters
    ----------
    tau : array_like, shape (n,)
        Strictly increasing grid from 0 to 1 (the pilot's τ values).
    metric : array_like, shape (n,)
        Estimates of ``G(τ_i) = Var_{τ_i}[∂_τ log γ_τ]`` (``Var(Δ)`` for the geometric path;
        see :func:`path_score` for a power-mean path). Negative values are errors, and so
        are non-finite ones except at ``τ = 0`` and ``τ = 1``: there a ``nan`` or ``inf``
        is replaced by the neighbouring estimate. A power-mean path's metric can diverge
        at an end (α > 0 at τ = 1, α < 0 at τ = 0, when the far end is much narrower than
        the near one) and a finite pilot then reports a huge, noisy value there; pass
        ``nan`` for it, or the trapezoid over the last interval would take almost all the
        steps.
    n_steps : int
        Number of steps ``K`` of the returned schedule.
    floor : float, default 1e-3
        Each interval's ``√Ḡ_j`` is raised to at least ``floor`` times the grid average of
        ``√Ḡ``, so that a region where the pilot saw no variation still gets a little
        length and the schedule stays strictly increasing.

    Returns
    -------
    numpy.ndarray, shape (n_steps + 1,)
        Strictly increasing τ with ``τ_0 = 0`` and ``τ_K = 1``.
    """
    t = _check_grid(tau, "tau")
    g = np.asarray(metric, dtype=float)
    if g.shape != t.shape:
        raise ValueError(f"metric must have the shape of tau {t.shape}, got {g.shape}")
    g = g.copy()
    for end, inner in ((0, 1), (-1, -2)):
        if not np.isfinite(g[end]) and np.size(g) > 2:
            g[end] = g[inner]
    if not np.all(np.isfinite(g)) or np.any(g < 0):
        raise ValueError(
            "metric must be finite and non-negative (a variance per τ); only its first and "
            "last entries may be nan or inf (unknown or divergent: the neighbour's is used)"
        )
    k = _check_k(n_steps)
    if not (np.isfinite(floor) and 0 < floor <= 1):
        raise ValueError(f"floor must be in (0, 1], got {floor!r}")
    dt = np.diff(t)
    speed = np.sqrt(0.5 * (g[:-1] + g[1:]))
    mean_speed = np.sum(speed * dt)
    if mean_speed <= 0:
        return np.linspace(0.0, 1.0, k + 1)
    speed = np.maximum(speed, floor * mean_speed)
    length = np.concatenate([[0.0], np.cumsum(speed * dt)])
    out = np.interp(np.linspace(0.0, length[-1], k + 1), length, t)
    out[0], out[-1] = 0.0, 1.0
    return out


def schedule_bias(tau, metric, schedule) -> float:
    """Second-order prediction ``½ Σ_k h_k² G(τ_k)`` of ``Σ_k KL(p_k ‖ p_{k+1})``.

    ``G`` is interpolated linearly from the grid ``(tau, metric)`` at each step's midpoint.
    This is the asymptotic bias of ``E[log w]`` under perfect transitions (Theorem 1 of
    seed 004), useful to compare schedules from one pilot.
    """
    t = _check_grid(tau, "tau")
    s = _check_grid(schedule, "schedule")
    g = np.asarray(metric, dtype=float)
    h = np.diff(s)
    mid = 0.5 * (s[:-1] + s[1:])
    return float(0.5 * np.sum(h**2 * np.interp(mid, t, g)))


def path_score(delta, tau: float, alpha: float = 0.0, c: float = 0.0) -> np.ndarray:
    """``∂_τ log γ_τ`` of the geometric (α = 0) or power-mean path at the particles.

    ``u = Δ`` for α = 0; otherwise ``u = (r − 1) / (α ((1 − τ) + τ r))`` with
    ``r = exp(α (Δ − c))``, computed as ``(w/τ − (1 − w)/(1 − τ)) / α`` with the gradient
    weight ``w`` in log space (exact for ``0 < τ < 1``; the limits at τ = 0 and τ = 1 are
    ``(r − 1)/α`` and ``(1 − 1/r)/α``). Non-finite ``Δ`` gives ``nan`` (give it zero weight
    in :func:`fisher_metric`).

    Parameters
    ----------
    delta : array_like
        ``Δ = log π̃ − log q0`` at the particles.
    tau : float
        Annealing parameter in ``[0, 1]``.
    alpha : float, default 0.0
        Power-mean exponent.
    c : float, default 0.0
        The path's scale shift (only used for α ≠ 0).
    """
    d = np.asarray(delta, dtype=float)
    if not (0.0 <= tau <= 1.0):
        raise ValueError(f"tau must be in [0, 1], got {tau!r}")
    if alpha == 0.0:
        return np.where(np.isfinite(d), d, np.nan)
    with np.errstate(over="ignore", invalid="ignore"):
        a = alpha * (d - c)
        if tau == 0.0:
            u = np.expm1(a) / alpha
        elif tau == 1.0:
            u = -np.expm1(-a) / alpha
        else:
            log_num = np.log(tau) + a
            log_den = np.logaddexp(np.log1p(-tau), log_num)
            w = np.exp(log_num - log_den)
            u = (w / tau - (1.0 - w) / (1.0 - tau)) / alpha
    return np.where(np.isfinite(u), u, np.nan)


def fisher_metric(score, log_weights=None) -> float:
    """Weighted variance of the score: the estimate of ``G(τ)`` from one population.

    Parameters
    ----------
    score : array_like, shape (N,)
        ``∂_τ log γ_τ`` at the particles (:func:`path_score`); ``nan`` entries get zero
        weight.
    log_weights : array_like, shape (N,), optional
        Self-normalized importance log weights of the particles for ``p_τ`` (an AIS
        population's current weights); uniform if omitted.

    Returns
    -------
    float
        ``Σ w_i (u_i − ū)²`` with normalized weights (0 if fewer than two usable particles).
    """
    u = np.asarray(score, dtype=float)
    lw = np.zeros_like(u) if log_weights is None else np.asarray(log_weights, dtype=float)
    if lw.shape != u.shape:
        raise ValueError(f"log_weights must have the shape of score {u.shape}, got {lw.shape}")
    ok = np.isfinite(u) & np.isfinite(lw)
    if np.count_nonzero(ok) < 2:
        return 0.0
    lwn = lw[ok] - logsumexp(lw[ok])
    u = u[ok]
    mean = np.sum(np.exp(lwn) * u)
    # In log space: a power-mean score can exceed 1e154 far outside p_τ (e.g. at τ = 1), where
    # its weight is tiny; squaring it directly would overflow although w (u − ū)² does not.
    with np.errstate(divide="ignore"):
        log_dev2 = 2.0 * np.log(np.abs(u - mean))
    return float(np.exp(logsumexp(lwn + log_dev2)))
