"""Monte Carlo Diffusion (MCD): a learned backward kernel for ULA annealing, and training.

MCD (Doucet, Grathwohl, Matthews & Strathmann 2022; ALGORITHMS.md §9) keeps the ULA
proposal of :mod:`pymc_crais.core.learned.ula` and replaces its backward kernel by
``B_k(x_{k−1} | x_k) = N(x_k − ε_k ∇log γ_k(x_k) + 2ε_k s_φ(k, x_k), 2ε_k I)`` where
``s_φ = ∇log γ_k + s̃_φ`` approximates the score of the proposal's marginal at step
``k``. The correction ``s̃_φ`` is the small residual network :class:`ResidualScore`; its
last layer starts at zero, so training starts from the plain ULA reversal.

Since the proposal does not depend on ``φ``, the ELBO's gradient in ``φ`` is
``E_Q[Σ_k ∇_φ log B_k]``: with ``log B_k = −|x_{k−1} − x_k − ε_k ∇log γ_k(x_k) −
2ε_k s̃_φ(k, x_k)|² / (4ε_k) + const`` this is a denoising score-matching regression of
``s̃_φ(k, x_k)`` on ``(x_{k−1} − x_k − ε_k ∇log γ_k(x_k)) / (2ε_k)`` over forward
trajectories simulated without gradients. Step sizes (and ``q0``, the schedule) can be
learned jointly by differentiating through the chain, including the network's input
Jacobian.

The network and its gradients are hand-written NumPy (exact backpropagation, checked
against finite differences in the tests): at these sizes (a few thousand particle-steps
of a 1–3 block MLP per iteration) it was measured faster than a compiled PyTensor graph of
the same network (docs/algorithms.md), and it keeps the core free of PyTensor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .ula import (
    Adam,
    LangevinTarget,
    log_z_estimate,
    step_sizes_from_params,
    uha_log_weights,
    ula_log_weights,
)

__all__ = ["METHODS", "ResidualScore", "TrainResult", "estimate", "train"]

METHODS = ("mcd", "ula", "uha")


def _swish(z):
    s = 0.5 * (1.0 + np.tanh(0.5 * z))
    return z * s, s


def _dswish(z, s):
    return s * (1.0 + z * (1.0 - s))


@dataclass
class ResidualScore:
    """``s̃_φ(k, x)``: a residual MLP with a learned embedding of the step ``k``.

    ``h = x W_in + b_in + E_k``; each block ``h ← h + swish(swish(h) W_1 + b_1 + T_k) W_2
    + b_2``; output ``swish(h) W_out + b_out`` with ``W_out = 0``, ``b_out = 0`` at
    initialization (so ``s̃ = 0``: the ULA reversal).

    Parameters
    ----------
    dim : int
        ``d``.
    n_steps : int
        ``K`` (the embedding has one row per step).
    hidden : int, default 64
        Width ``d_h`` (blocks widen to ``2 d_h``).
    n_blocks : int, default 2
    """

    dim: int
    n_steps: int
    hidden: int = 64
    n_blocks: int = 2

    def init(self, rng: np.random.Generator) -> dict:
        """Random initial parameters (zero last layer)."""
        d, h, K = self.dim, self.hidden, self.n_steps
        p = {
            "W_in": rng.normal(0.0, 1.0 / np.sqrt(d), (d, h)),
            "b_in": np.zeros(h),
            "E": rng.normal(0.0, 1.0, (K + 1, h)),
            "W_out": np.zeros((h, d)),
            "b_out": np.zeros(d),
        }
        for j in range(self.n_blocks):
            p[f"W1_{j}"] = rng.normal(0.0, 1.0 / np.sqrt(h), (h, 2 * h))
            p[f"b1_{j}"] = np.zeros(2 * h)
            p[f"T_{j}"] = rng.normal(0.0, 1.0, (K + 1, 2 * h))
            p[f"W2_{j}"] = rng.normal(0.0, 0.5 / np.sqrt(2 * h), (2 * h, h))
            p[f"b2_{j}"] = np.zeros(h)
        return p

    def forward(self, p: dict, k: int, x: np.ndarray):
        """``(s̃(k, x), cache)`` for all rows of ``x``."""
        h = x @ p["W_in"] + p["b_in"] + p["E"][k]
        blocks = []
        for j in range(self.n_blocks):
            a, sa = _swish(h)
            z = a @ p[f"W1_{j}"] + p[f"b1_{j}"] + p[f"T_{j}"][k]
            m, sz = _swish(z)
            blocks.append((h, sa, a, z, sz, m))
            h = h + m @ p[f"W2_{j}"] + p[f"b2_{j}"]
        o, so = _swish(h)
        return o @ p["W_out"] + p["b_out"], (k, x, blocks, h, so, o)

    def backward(self, p: dict, cache, cot: np.ndarray, acc: dict | None) -> np.ndarray:
        """Backpropagate ``cot`` (``∂J/∂s̃``): add parameter gradients into ``acc`` (if
        not None) and return ``∂J/∂x``."""
        k, x, blocks, hf, so, o = cache
        if acc is not None:
            acc["W_out"] += o.T @ cot
            acc["b_out"] += cot.sum(axis=0)
        dh = (cot @ p["W_out"].T) * _dswish(hf, so)
        for j in range(self.n_blocks - 1, -1, -1):
            h, sa, a, z, sz, m = blocks[j]
            dm = dh @ p[f"W2_{j}"].T
            dz = dm * _dswish(z, sz)
            if acc is not None:
                acc[f"W2_{j}"] += m.T @ dh
                acc[f"b2_{j}"] += dh.sum(axis=0)
                acc[f"W1_{j}"] += a.T @ dz
                dzs = dz.sum(axis=0)
                acc[f"b1_{j}"] += dzs
                acc[f"T_{j}"][k] += dzs
            dh = dh + (dz @ p[f"W1_{j}"].T) * _dswish(h, sa)
        if acc is not None:
            acc["W_in"] += x.T @ dh
            dhs = dh.sum(axis=0)
            acc["b_in"] += dhs
            acc["E"][k] += dhs
        return dh @ p["W_in"].T


@dataclass
class TrainResult:
    """Learned parameters and the training curve.

    Attributes
    ----------
    params : dict
        Sampler parameters (see :func:`pymc_crais.core.learned.ula.init_params`).
    net_params : dict or None
        The network's parameters (MCD).
    elbo, log_z : numpy.ndarray, shape (train_steps,)
        Per iteration: the batch mean of ``log w`` and ``log mean w``.
    """

    params: dict
    net_params: dict | None
    elbo: np.ndarray
    log_z: np.ndarray
    step_sizes_initial: np.ndarray = field(default=None)


def _log_weights(method, target, params, rng, n, score, net_params, gradient):
    if method == "uha":
        return uha_log_weights(target, params, rng, n, gradient=gradient)
    return ula_log_weights(
        target,
        params,
        rng,
        n,
        score=score if method == "mcd" else None,
        net_params=net_params,
        gradient=gradient,
    )


def train(
    target: LangevinTarget,
    params: dict,
    rng: np.random.Generator,
    *,
    method: str = "mcd",
    train_steps: int = 500,
    batch: int = 64,
    learn: tuple[str, ...] = ("step_logit",),
    lr: float = 1e-2,
    net_lr: float = 1e-3,
    decay: float = 0.1,
    score: ResidualScore | None = None,
    net_params: dict | None = None,
    callback: Callable[[int, float], None] | None = None,
) -> TrainResult:
    """Maximize the ELBO ``E_Q[log w]`` by Adam on batches of ``batch`` trajectories.

    Parameters
    ----------
    target : LangevinTarget
    params : dict
        Initial sampler parameters (copied).
    rng : numpy.random.Generator
    method : {"mcd", "ula", "uha"}
    train_steps : int
        Adam iterations.
    batch : int
        Trajectories per iteration.
    learn : tuple of str
        Sampler parameters to learn (``"step_logit"``, ``"schedule_logit"``, ``"mu"``,
        ``"log_sigma"``, and for UHA ``"eta_logit"``); MCD always learns its network.
    lr, net_lr : float
        Adam learning rates of the sampler parameters and of the network.
    decay : float, default 0.1
        Both rates decay exponentially to ``decay`` times their initial value at the last
        iteration (1: constant).
    score, net_params : optional
        MCD's network and its initial parameters (default ``ResidualScore(d, K)``).
    callback : callable, optional
        ``callback(iteration, elbo)`` after each iteration (progress).

    Returns
    -------
    TrainResult
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    params = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in params.items()}
    K = params["step_logit"].size
    if method == "mcd":
        if score is None:
            score = ResidualScore(target.dim, K)
        net_params = (
            score.init(rng) if net_params is None else {k: v.copy() for k, v in net_params.items()}
        )
    else:
        net_params = None
    allowed = {"step_logit", "schedule_logit", "mu", "log_sigma"} | (
        {"eta_logit"} if method == "uha" else set()
    )
    bad = set(learn) - allowed
    if bad:
        raise ValueError(
            f"cannot learn {sorted(bad)} with method={method!r}; choose from {sorted(allowed)}"
        )
    gradient = tuple(learn) + (("net",) if method == "mcd" else ())
    opt, opt_net = Adam(lr), Adam(net_lr)
    elbo = np.empty(train_steps)
    logz = np.empty(train_steps)
    eps0 = step_sizes_from_params(params)
    for it in range(train_steps):
        lw, grads = _log_weights(method, target, params, rng, batch, score, net_params, gradient)
        fin = lw[np.isfinite(lw)]
        elbo[it] = fin.mean() if fin.size else -np.inf
        logz[it] = log_z_estimate(lw)[0]
        grads.pop("x", None)
        net_g = grads.pop("net", None)
        f = decay ** (it / max(train_steps - 1, 1))
        if grads:
            opt.step(params, grads, lr * f)
        if net_g is not None:
            opt_net.step(net_params, net_g, net_lr * f)
        if callback is not None:
            callback(it, float(elbo[it]))
    return TrainResult(params, net_params, elbo, logz, eps0)


def estimate(
    target: LangevinTarget,
    trained: TrainResult | dict,
    rng: np.random.Generator,
    n: int,
    *,
    method: str = "mcd",
    score: ResidualScore | None = None,
    batch: int = 1024,
    return_x: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Log-weights of ``n`` fresh trajectories with the (learned) parameters.

    Parameters
    ----------
    target : LangevinTarget
    trained : TrainResult or dict
        A training result, or sampler parameters (no network: ULA/UHA).
    rng : numpy.random.Generator
    n : int
    method : {"mcd", "ula", "uha"}
    score : ResidualScore, optional
        The network of ``trained`` (MCD; default ``ResidualScore(d, K)``).
    batch : int, default 1024
        Trajectories simulated at once.
    return_x : bool, default False
        Also return the final states ``x_K`` (weighted draws of the target).

    Returns
    -------
    log_w : numpy.ndarray, shape (n,)
    x : numpy.ndarray, shape (n, d)
        Only with ``return_x``.
    """
    if isinstance(trained, TrainResult):
        params, net_params = trained.params, trained.net_params
    else:
        params, net_params = trained, None
    if method == "mcd" and score is None:
        score = ResidualScore(target.dim, params["step_logit"].size)
    out, xs = [], []
    done = 0
    while done < n:
        m = min(batch, n - done)
        lw, extra = _log_weights(method, target, params, rng, m, score, net_params, ())
        out.append(lw)
        xs.append(extra["x"])
        done += m
    if return_x:
        return np.concatenate(out), np.concatenate(xs)
    return np.concatenate(out)
