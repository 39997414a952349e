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

__all__ = ["StudentTMixture", "mode_weights"]


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
