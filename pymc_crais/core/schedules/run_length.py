"""How many annealing steps an AIS run needs for a target Monte Carlo error of ``log Ẑ``.

An AIS run with ``N`` independent particles estimates ``log Z`` with variance about
``r / N``, where ``r = Var[w] / E[w]²`` is the relative variance of one particle's weight
(:func:`~pymc_crais.core.weights.log_z_relative_variance`). ``r`` falls as the schedule gets
more steps ``K``: with perfect transitions about as ``exp(a / K) − 1``, with the imperfect
ones a sampler can afford much more slowly. Importance sampling from ``q0`` is ``K = 1``.

Given ``r`` measured at a few lengths on run-level particles (the start's importance
weights at ``K = 1``, a tuning run at its own length), :func:`predicted_relative_variance`
interpolates ``log r`` linearly in ``log K`` between them and extrapolates beyond the
longest one with a slope no steeper than ``1 / K``; :func:`choose_length` takes the fewest
steps whose predicted error of the final run meets the target. The measured points come
from particles the final run does not use, so the choice keeps the final estimate
unbiased for ``Z``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...warnings import renamed_argument
from ..weights import log_z_relative_variance

__all__ = [
    "LENGTHS",
    "LengthPoint",
    "choose_length",
    "length_settled",
    "predicted_mcse",
    "predicted_relative_variance",
    "relative_variance",
]

LENGTHS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 200)
"""Candidate numbers of steps, in the order tried."""


def relative_variance(log_weights) -> float:
    """``r = Var[w] / E[w]²`` of one particle's weight from a sample of log-weights: the
    importance-sampling estimate ``N / ESS − 1``; ``inf`` when no weight is finite.

    Trust it only when the weights' right tail is light (a Pareto k̂ below 1/2): a sample
    misses the rare large weights of a heavy tail. (The log-normal estimate
    ``exp(Var[log w]) − 1`` is no safer: a Student-t start's far draws have log-weights of
    −100s, weights of 0 that leave ``r`` unchanged and make ``Var[log w]`` enormous.)
    """
    lw = np.asarray(log_weights, dtype=np.float64).ravel()
    lw = lw[np.isfinite(lw)]
    if lw.size < 2:
        return float("inf")
    return float(log_z_relative_variance(lw) * lw.size)


@dataclass(frozen=True)
class LengthPoint:
    """A measured relative variance ``r`` of a run with ``steps`` steps."""

    steps: int
    r: float


def predicted_relative_variance(points: list[LengthPoint], steps: int) -> float:
    """``r`` predicted at ``steps`` steps from measured points (see the module docstring).

    Below the shortest measured length the prediction is ``inf`` (an unmeasured short run
    is never chosen); between two points ``log r`` is interpolated linearly in ``log K``;
    beyond the longest it is extrapolated with the slope of the last two points, bounded to
    ``[−1, 0]`` (never faster than perfect transitions, never rising); with one point only,
    ``r`` is held constant beyond it (no fall is assumed that was not seen).
    """
    pts = sorted((p for p in points if np.isfinite(p.r) and p.r >= 0), key=lambda p: p.steps)
    if not pts or steps < pts[0].steps:
        return float("inf")
    ks = np.log([p.steps for p in pts])
    rs = np.log([max(p.r, 1e-12) for p in pts])
    k = np.log(steps)
    if k <= ks[-1]:
        return float(np.exp(np.interp(k, ks, rs)))
    slope = 0.0
    if len(pts) > 1 and ks[-1] > ks[-2]:
        slope = float(np.clip((rs[-1] - rs[-2]) / (ks[-1] - ks[-2]), -1.0, 0.0))
    return float(np.exp(rs[-1] + slope * (k - ks[-1])))


def predicted_mcse(r: float, draws: int, chains: int) -> float:
    """Monte Carlo error of ``log Ẑ`` pooled over ``chains`` runs of ``draws`` particles
    whose weights have relative variance ``r``."""
    return float(np.sqrt(r / (draws * chains))) if np.isfinite(r) else float("inf")


def choose_length(
    points: list[LengthPoint],
    draws: int,
    chains: int,
    target: float,
    max_length: int = LENGTHS[-1],
    lengths=LENGTHS,
    **old,
) -> tuple[int, float]:
    """The fewest steps (of ``lengths``, at most ``max_length``) whose predicted pooled
    error is at most ``target``, and that prediction; ``max_length`` (and its prediction)
    when none is.

    Parameters
    ----------
    points : list of LengthPoint
        Measured relative variances.
    draws, chains : int
        Particles per chain and chains of the final run.
    target : float
        Target Monte Carlo error of the pooled ``log Ẑ``, in nats.
    max_length : int
        The longest run allowed (old name ``max_steps``, which elsewhere caps the stages of
        an adaptive schedule; a :class:`~pymc_crais.warnings.RenamedWarning`).
    lengths : sequence of int
        Candidates, increasing.

    Returns
    -------
    (int, float)
    """
    max_length = renamed_argument("choose_length", "max_steps", "max_length", max_length, old)
    for k in lengths:
        if k > max_length:
            break
        mcse = predicted_mcse(predicted_relative_variance(points, k), draws, chains)
        if mcse <= target:
            return int(k), mcse
    return int(max_length), predicted_mcse(predicted_relative_variance(points, max_length), draws, chains)


def length_settled(
    points: list[LengthPoint],
    draws: int,
    chains: int,
    target: float,
    max_length: int,
    short_enough: int,
    next_length: int,
) -> bool:
    """Whether a run measured at about ``next_length`` steps could no longer shorten the
    run :func:`choose_length` chooses from ``points`` enough to be worth making.

    ``True`` when the target is predicted met within ``short_enough`` steps, or when
    ``next_length`` is no longer than the longest measured point and the target is out of
    reach at ``max_length`` even if ``r`` fell as ``1 / K`` beyond that point (the steepest
    fall :func:`predicted_relative_variance` extrapolates, whatever shorter point is added):
    the choice is then ``max_length`` whatever the new point shows.
    """
    k, mcse = choose_length(points, draws, chains, target, max_length)
    if mcse <= target and k <= short_enough:
        return True
    pts = [p for p in points if np.isfinite(p.r) and p.r >= 0]
    if not pts:
        return False
    longest = max(pts, key=lambda p: p.steps)
    if next_length > longest.steps:
        return False
    best = longest.r * longest.steps / max(max_length, longest.steps)
    return predicted_mcse(best, draws, chains) > target
