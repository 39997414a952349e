"""A start for a posterior with several modes: a mixture of Student-ts, one at each mode.

A mode search (:mod:`pymc_crais.core.mode_search`) that finds several separated modes rules
out a single Student-t at the Laplace fit: annealed from one mode, a run never sees the
others. From the prior, a run sees them only as far as its particles, tempered from the
prior, happen to fall into each basin in the right proportion, which costs many stages and
often loses a mode's worth of mass (a label-switching mixture's two copies, or the third
component of a three-component mixture). A mixture with a Laplace fit's Student-t at each
mode found starts particles in every one of them; its weights ``π/q0`` are exact because the
mixture is normalized and drawn exactly.

The components' weights are half the Laplace approximations of the modes' masses and half
uniform, so a mode whose Laplace mass is underestimated (a skewed or heavy-tailed mode) still
gets particles. The mixture is used with a defensive share of the prior
(:class:`~pymc_crais.core.defensive.DefensiveMixtureDensity`), which covers modes the search
did not find as the prior does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from .initial import StudentTInitial

__all__ = [
    "MODE_MINOR",
    "MODE_MINOR_SHARE",
    "StudentTMixture",
    "component_shares",
    "dominant_mode",
    "mode_weights",
]

MODE_MINOR = 10.0
"""Nats of Laplace mass by which one mode must exceed every other found for the posterior
to be started as unimodal, at that mode (no mixture, no ``modes`` flag; with
:data:`MODE_MINOR_SHARE`, :func:`dominant_mode`). A centred hierarchical model with
Gamma(0.001, 0.001) precisions has such a mode: the funnel's neck, where every group effect
equals the mean (``applied_bugs_oneway``: 12 nats below the mode that holds the posterior)."""
MODE_MINOR_SHARE = 0.01
"""The largest total share of the posterior's mass, measured by the mode-mixture start's
pilot, of the modes that :func:`dominant_mode` leaves out: leaving them out lowers ``log Z``
by at most about that much, 0.01 nat, half the default ``target_mcse`` (the shares' Monte
Carlo error aside; ``applied_bugs_oneway``'s neck measured 6e-5 to 7e-4)."""


def mode_weights(log_masses) -> np.ndarray:
    """Component weights from the modes' log Laplace masses: half their normalized masses,
    half uniform (non-finite masses count as 0)."""
    lm = np.asarray(log_masses, dtype=np.float64)
    k = lm.size
    if k == 0:
        raise ValueError("no modes")
    lm = np.where(np.isfinite(lm), lm, -np.inf)
    if np.all(lm == -np.inf):
        return np.full(k, 1.0 / k)
    share = np.exp(lm - logsumexp(lm))
    return 0.5 * share + 0.5 / k


@dataclass(frozen=True)
class StudentTMixture:
    """``q0 = Σ_k w_k t_k``: a normalized mixture of Student-ts with exact draws.

    Parameters
    ----------
    components : tuple of StudentTInitial
        One per mode, all of the same dimension.
    weights : numpy.ndarray
        Positive, summing to 1.
    """

    components: tuple
    weights: np.ndarray
    name: str = "student_t_mixture"

    def __post_init__(self):
        comps = tuple(self.components)
        if not comps:
            raise ValueError("a mixture needs at least one component")
        if not all(isinstance(c, StudentTInitial) for c in comps):
            raise TypeError("every component must be a StudentTInitial")
        if len({c.dim for c in comps}) != 1:
            raise ValueError(f"components of different dimensions: {[c.dim for c in comps]}")
        w = np.asarray(self.weights, dtype=np.float64).ravel()
        if w.size != len(comps) or not np.all(np.isfinite(w)) or np.any(w <= 0.0):
            raise ValueError(f"weights must be {len(comps)} positive numbers, got {self.weights!r}")
        object.__setattr__(self, "components", comps)
        object.__setattr__(self, "weights", w / w.sum())

    @property
    def dim(self) -> int:
        """Dimension."""
        return self.components[0].dim

    @property
    def mean(self) -> np.ndarray:
        """The mixture's location (the weighted mean of the components' locations)."""
        return self.weights @ np.stack([c.mean for c in self.components])

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` exact draws: the components' counts multinomial, rows in a random order."""
        counts = rng.multinomial(n, self.weights)
        parts = [c.draw(rng, int(m)) for c, m in zip(self.components, counts) if m]
        x = np.concatenate(parts) if parts else np.empty((0, self.dim))
        return x[rng.permutation(n)]

    def _log_terms(self, x):
        return np.stack(
            [np.log(w) + c.logpdf(x) for c, w in zip(self.components, self.weights)], axis=1
        )

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        """Normalized log-density of every row of ``x``."""
        return logsumexp(self._log_terms(x), axis=1)

    def logpdf_and_grad(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`logpdf` and its gradient (the components' gradients weighted by their
        responsibilities) for every row of ``x``."""
        parts = [c.logpdf_and_grad(x) for c in self.components]
        terms = np.stack([np.log(w) + lp for (lp, _), w in zip(parts, self.weights)], axis=1)
        lq = logsumexp(terms, axis=1)
        with np.errstate(invalid="ignore", under="ignore"):
            r = np.exp(terms - lq[:, None])
        r = np.where(np.isfinite(r), r, 0.0)
        grad = sum(r[:, [k]] * g for k, (_, g) in enumerate(parts))
        return lq, grad

    def grad_logpdf(self, x: np.ndarray) -> np.ndarray:
        """Gradient of :meth:`logpdf`."""
        return self.logpdf_and_grad(x)[1]


def component_shares(mixture, x, log_q, log_w, scale: float = 1.0) -> np.ndarray:
    """Each component's measured share of the target's mass, from importance draws.

    ``x`` are draws of a start whose density is ``exp(log_q)`` and in which ``mixture``
    enters with factor ``scale`` (``1 − ε`` in a defensive mixture with the prior), and
    ``log_w`` their log-weights against the (unnormalized) target. A draw's weight is split
    among the components by their responsibilities ``scale · w_k t_k(x) / q(x)``, so the
    shares are self-normalized importance estimates of the mass each component covers (the
    rest, the defensive part's, is ``1 − Σ shares``); ``NaN`` when no weight is finite.
    """
    lw = np.where(np.isfinite(log_w), log_w, -np.inf)
    if not np.isfinite(lw).any():
        return np.full(len(mixture.components), np.nan)
    terms = mixture._log_terms(x) + np.log(scale) - np.asarray(log_q)[:, None]
    with np.errstate(invalid="ignore", under="ignore"):
        r = np.where(np.isfinite(terms), np.exp(terms), 0.0)
    w = np.exp(lw - lw.max())
    return (w @ r) / w.sum()


def dominant_mode(fits, shares=None):
    """``(fit, share, note)``: the fit of the one mode that holds all but a negligible share of
    the posterior, the others' measured share, and why; ``(None, nan, "")`` when there is no
    such mode.

    Both tests must pass: every other fitted mode's Laplace mass is more than
    :data:`MODE_MINOR` nats below its own, and their measured shares (``shares``, one per fit,
    :func:`component_shares` of the mode-mixture start's pilot) sum to less than
    :data:`MODE_MINOR_SHARE`: a Laplace mass can understate a heavy-tailed mode's mass by
    many nats in high dimension, the pilot measures it. Fewer than two fits (the other modes
    merged when refitted, or left without a component) or no shares: ``None``."""
    if not fits or len(fits) < 2 or shares is None or len(shares) != len(fits):
        return None, np.nan, ""
    masses = np.array([f.log_evidence() for f in fits])
    top = int(np.argmax(masses))
    gaps = np.delete(masses[top] - masses, top)
    rest = float(np.sum(np.delete(np.asarray(shares, dtype=np.float64), top)))
    if not (np.all(gaps > MODE_MINOR) and rest < MODE_MINOR_SHARE):  # (NaN: not negligible)
        return None, np.nan, ""
    return fits[top], rest, (f"one holding all but a negligible share (the others' Laplace masses "
                       f"{gaps.min():.1f} nats or more below, their measured share {rest:.1e}): "
                       "one mode started")
