"""Adam (Kingma & Ba 2015) on nested dicts of NumPy arrays: the optimizer of the learned
annealing in :mod:`pymc_crais.core.learned.ula` and :mod:`pymc_crais.core.learned.mcd`."""

from __future__ import annotations

import numpy as np

__all__ = ["Adam"]


# ----------------------------------------------------------------------------- Adam
class Adam:
    """Adam (Kingma & Ba) ascent on a dict of arrays (nested one level for networks).

    Parameters
    ----------
    lr : float
        Learning rate.
    beta1, beta2, eps : float
        The usual constants.
    clip : float or None, default 10.0
        Each gradient array is rescaled to at most this Euclidean norm (a guard against
        the occasional huge gradient of a degenerate trajectory).
    """

    def __init__(
        self,
        lr: float = 1e-3,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        clip: float | None = 10.0,
    ):
        self.lr, self.b1, self.b2, self.eps, self.clip = lr, beta1, beta2, eps, clip
        self.m: dict = {}
        self.v: dict = {}
        self.t = 0

    def step(self, params: dict, grads: dict, lr: float | None = None) -> None:
        """Move ``params`` (in place) up the gradient ``grads`` (same keys, a subset)."""
        self.t += 1
        lr = self.lr if lr is None else lr
        corr = np.sqrt(1.0 - self.b2**self.t) / (1.0 - self.b1**self.t)
        for key, g in _flat(grads):
            g = np.asarray(g, dtype=np.float64)
            if not np.all(np.isfinite(g)):
                continue
            if self.clip is not None:
                nrm = float(np.sqrt(np.sum(g * g)))
                if nrm > self.clip:
                    g = g * (self.clip / nrm)
            m = self.m.get(key)
            if m is None:
                m = self.m[key] = np.zeros_like(g)
                self.v[key] = np.zeros_like(g)
            m *= self.b1
            m += (1.0 - self.b1) * g
            vv = self.v[key]
            vv *= self.b2
            vv += (1.0 - self.b2) * g * g
            upd = lr * corr * m / (np.sqrt(vv) + self.eps)
            _set(params, key, _get(params, key) + upd)


def _flat(grads, prefix=()):
    for key, val in grads.items():
        if isinstance(val, dict):
            yield from _flat(val, (*prefix, key))
        else:
            yield (*prefix, key), val


def _get(d, key):
    for k in key:
        d = d[k]
    return d


def _set(d, key, val):
    for k in key[:-1]:
        d = d[k]
    d[key[-1]] = val
