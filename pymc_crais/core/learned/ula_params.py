"""The learnable parameters of unadjusted annealing (:mod:`pymc_crais.core.learned.ula`): their
initial values, the step sizes, schedule and momentum persistence they encode (through
bounded sigmoids), and the chain rule from gradients in those to gradients in the
parameters."""

from __future__ import annotations

import numpy as np

__all__ = [
    "betas_from_params",
    "chain_params_grad",
    "eta_from_params",
    "init_params",
    "logit",
    "sigmoid",
    "step_sizes_from_params",
]


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))


def logit(p):
    p = np.asarray(p, dtype=np.float64)
    return np.log(p) - np.log1p(-p)


def init_params(
    dim: int,
    n_steps: int,
    *,
    step_size: float = 0.05,
    max_step_size: float = 0.25,
    mean=None,
    scale=None,
    eta: float = 0.9,
) -> dict:
    """Initial parameters: equal step sizes, a linear schedule, ``q0 = N(mean, scale²)``.

    Parameters
    ----------
    dim, n_steps : int
        ``d`` and the number of annealing steps ``K``.
    step_size : float, default 0.05
        Initial ``ε_k`` (all steps), below ``max_step_size``.
    max_step_size : float, default 0.25
        Upper bound of the learned step sizes (kept in ``params["max_step_size"]``).
    mean, scale : array_like, optional
        Initial Gaussian (default standard normal).
    eta : float, default 0.9
        UHA's initial momentum persistence.
    """
    if not 0 < step_size < max_step_size:
        raise ValueError(
            f"step_size must be in (0, max_step_size={max_step_size}), got {step_size}"
        )
    mean = (
        np.zeros(dim) if mean is None else np.broadcast_to(np.asarray(mean, float), (dim,)).copy()
    )
    scale = (
        np.ones(dim) if scale is None else np.broadcast_to(np.asarray(scale, float), (dim,)).copy()
    )
    return {
        "step_logit": np.full(n_steps, float(logit(step_size / max_step_size))),
        "schedule_logit": np.zeros(n_steps),
        "mu": mean,
        "log_sigma": np.log(scale),
        "eta_logit": np.array(float(logit((eta - 0.01) / 0.98))),
        "max_step_size": float(max_step_size),
    }


def step_sizes_from_params(params: dict) -> np.ndarray:
    """``ε_k``, ``k = 1..K``."""
    return params["max_step_size"] * sigmoid(params["step_logit"])


def betas_from_params(params: dict) -> np.ndarray:
    """``β_0..β_K`` (``β_0 = 0``, ``β_K = 1``)."""
    s = sigmoid(params["schedule_logit"])
    c = np.cumsum(s)
    return np.concatenate([[0.0], c / c[-1]])


def eta_from_params(params):
    return 0.98 * float(sigmoid(params["eta_logit"])) + 0.01


def chain_params_grad(params, g_eps, g_beta, g_eta=None):
    """Gradients of the unconstrained parameters from those of ``ε_k``, ``β_k`` and ``η``."""
    eps = step_sizes_from_params(params)
    s = sigmoid(params["schedule_logit"])
    c = np.cumsum(s)
    total = c[-1]
    gb = g_beta[1:]  # β_1..β_K
    # β_k = c_k / C: ∂β_k/∂s_j = [j ≤ k]/C − c_k/C²
    g_s = np.cumsum(gb[::-1])[::-1] / total - np.sum(gb * c) / total**2
    out = {
        "step_logit": g_eps * eps * (1.0 - eps / params["max_step_size"]),
        "schedule_logit": g_s * s * (1.0 - s),
    }
    if g_eta is not None:
        sg = float(sigmoid(params["eta_logit"]))
        out["eta_logit"] = np.array(g_eta * 0.98 * sg * (1.0 - sg))
    return out
