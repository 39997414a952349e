"""Differentiable annealing with unadjusted kernels: ULA and UHA AIS, and the MCD weights.

Notation (ALGORITHMS.md §9). A Gaussian ``q0 = N(μ, diag σ²)`` is annealed to the
unnormalized target ``γ`` along ``log γ_k = (1 − β_k) log q0 + β_k log γ`` with
``0 = β_0 < … < β_K = 1``. No move is accepted or rejected, so every transition density is
known and the importance weight of a whole trajectory is exact:

* **ULA** — forward ``F_k(x_k | x_{k−1}) = N(x_{k−1} + ε_k ∇log γ_k(x_{k−1}), 2ε_k I)``,
  backward ``B_k(x_{k−1} | x_k) = N(x_k + ε_k ∇log γ_k(x_k) + 2ε_k s̃_k(x_k), 2ε_k I)``.
  With ``s̃ = 0`` the backward kernel is the forward kernel run from ``x_k`` (the usual
  "AIS reversal" of unadjusted Langevin annealing); a learned correction ``s̃`` gives Monte
  Carlo Diffusion (:mod:`pymc_crais.core.learned.mcd`). Both normalizing constants are equal, so
  ``log w = log γ(x_K) − log q0(x_0) + Σ_k (|ξ_k|²/2 − |x_{k−1} − b_k(x_k)|² / (4ε_k))``
  with ``ξ_k`` the standard normal noise of step ``k`` and ``b_k`` the backward mean.
* **UHA** — a momentum ``v`` (``N(0, I)``) is partially refreshed, ``v' = η v + √(1−η²) ζ``,
  then one leapfrog step of size ``ε_k`` on ``log γ_k`` moves ``(x, v')`` to ``(x_k, v_k)``.
  The refresh is reversible for ``N(0, I)`` and the leapfrog map is a volume-preserving
  involution up to a momentum flip, so ``log w = log γ(x_K) − log q0(x_0) +
  Σ_k (|v'_k|² − |v_k|²) / 2``.

``E_Q[log w]`` is a lower bound of ``log Z`` (the ELBO). Every trajectory is a
differentiable function of the parameters given its noise (the reparameterization
``x_0 = μ + σ z``), so the ELBO's gradient with respect to the step sizes, ``μ``, ``σ``, the
schedule (and ``η``) is obtained by reverse-mode differentiation through the chain: one
batched Hessian-vector product of ``log γ`` per visited state, written out by hand below.

Parameters live in a dict of arrays (see :func:`init_params`):

* ``step_logit`` ``(K,)``: ``ε_k = max_step_size · sigmoid(step_logit_k)``;
* ``schedule_logit`` ``(K,)``: ``β_k = Σ_{j≤k} sigmoid(b_j) / Σ_j sigmoid(b_j)``;
* ``mu``, ``log_sigma`` ``(d,)``: the initial Gaussian;
* ``eta_logit`` ``()``: UHA's refresh ``η = 0.98 · sigmoid(u) + 0.01``.

Nothing here imports PyMC or PyTensor.
"""

from __future__ import annotations

import numpy as np

from ..weights import log_mean_exp, log_z_relative_variance
from .adam import Adam
from .langevin_targets import DensityTarget, FunctionTarget, LangevinTarget
from .ula_params import (
    betas_from_params,
    chain_params_grad,
    eta_from_params,
    init_params,
    step_sizes_from_params,
)

__all__ = [
    "Adam",
    "DensityTarget",
    "FunctionTarget",
    "LangevinTarget",
    "betas_from_params",
    "init_params",
    "step_sizes_from_params",
    "uha_log_weights",
    "ula_log_weights",
]

_LOG_2PI = np.log(2.0 * np.pi)


# ----------------------------------------------------------------------------- ULA / MCD
def ula_log_weights(
    target: LangevinTarget,
    params: dict,
    rng: np.random.Generator,
    n: int,
    *,
    score=None,
    net_params: dict | None = None,
    gradient: tuple[str, ...] = (),
) -> tuple[np.ndarray, dict]:
    """Run ``n`` ULA (or MCD) trajectories; their log-weights and ELBO gradients.

    Parameters
    ----------
    target : LangevinTarget
    params : dict
        From :func:`init_params`.
    rng : numpy.random.Generator
    n : int
        Number of trajectories.
    score : object, optional
        The backward correction ``s̃`` (MCD): ``score.forward(net_params, k, x) ->
        (out, cache)`` and ``score.backward(net_params, cache, cotangent, acc) ->
        input_cotangent`` (adding the parameters' gradients into the dict ``acc`` unless
        it is None). ``None``: the plain ULA reversal.
    net_params : dict, optional
        The network's parameters.
    gradient : tuple of str
        Which gradients of the ELBO ``mean(log w)`` to return: any of ``"step_logit"``,
        ``"schedule_logit"``, ``"mu"``, ``"log_sigma"`` (these differentiate through the
        chain) and ``"net"`` (the network only: the trajectory does not depend on it).

    Returns
    -------
    log_w : numpy.ndarray, shape (n,)
    grads : dict
        The requested gradients (``"net"`` is a dict of the network's gradients), and
        ``"x"``: the final states ``x_K``, shape ``(n, d)``.
    """
    d = target.dim
    K = params["step_logit"].size
    eps = step_sizes_from_params(params)
    beta = betas_from_params(params)
    mu = params["mu"]
    sigma = np.exp(params["log_sigma"])
    inv_var = 1.0 / sigma**2
    through = any(g in gradient for g in ("step_logit", "schedule_logit", "mu", "log_sigma"))
    want_net = "net" in gradient and score is not None
    store = through or want_net

    z = rng.standard_normal((n, d))
    x = mu + sigma * z
    log_w = 0.5 * np.sum(z * z, axis=1) + np.sum(params["log_sigma"]) + 0.5 * d * _LOG_2PI
    lp, gg = target.logp_grad(x)
    xs, ggs, xis, rs, caches, souts = [x], [gg], [], [], [], []
    for k in range(1, K + 1):
        e, b = eps[k - 1], beta[k]
        g_prev = (1.0 - b) * (-(x - mu) * inv_var) + b * gg
        xi = rng.standard_normal((n, d))
        x_new = x + e * g_prev + np.sqrt(2.0 * e) * xi
        lp, gg = target.logp_grad(x_new)
        g_new = (1.0 - b) * (-(x_new - mu) * inv_var) + b * gg
        back_mean = x_new + e * g_new
        if score is not None:
            s_out, cache = score.forward(net_params, k, x_new)
            back_mean = back_mean + 2.0 * e * s_out
        r = x - back_mean
        log_w += 0.5 * np.sum(xi * xi, axis=1) - np.sum(r * r, axis=1) / (4.0 * e)
        if store:
            xs.append(x_new)
            ggs.append(gg)
            xis.append(xi)
            rs.append(r)
            if score is not None:
                caches.append(cache)
                souts.append(s_out)
        x = x_new
    log_w = log_w + lp
    log_w = np.where(np.isfinite(log_w), log_w, -np.inf)
    grads: dict = {"x": x}
    if not store:
        return log_w, grads
    ok = np.isfinite(log_w)[:, None]  # a particle with a non-finite weight contributes nothing
    wn = ok / max(int(ok.sum()), 1)  # d mean(log w) / d log w_i
    net_grads = None
    if want_net:
        net_grads = {key: np.zeros_like(val) for key, val in net_params.items()}

    def add_net(cache, cot):
        return score.backward(net_params, cache, cot, net_grads)

    if not through:  # only the network: Σ_k ∂ log B_k / ∂ s̃_k · ∂ s̃_k / ∂φ
        for k in range(K, 0, -1):
            e = eps[k - 1]
            u = -rs[k - 1] / (2.0 * e) * wn
            add_net(caches[k - 1], -2.0 * e * u)
        grads["net"] = net_grads
        return log_w, grads

    g_eps = np.zeros(K)
    g_beta = np.zeros(K + 1)
    g_mu = np.zeros(d)
    g_ls = np.zeros(d)
    a = ggs[K] * wn  # adjoint of x_K
    pending = np.zeros((n, d))  # vector for the target's HVP at the current state

    def q0_grad_terms(xk, cot, coef):
        # the (1 − β) log q0 part of ∇log γ_k at xk, contracted with the cotangent coef·cot
        nonlocal g_mu, g_ls
        g_mu += coef * np.sum(cot, axis=0) * inv_var
        g_ls += coef * 2.0 * np.sum(cot * (xk - mu), axis=0) * inv_var

    for k in range(K, 0, -1):
        e, b = eps[k - 1], beta[k]
        xk, xprev = xs[k], xs[k - 1]
        r = rs[k - 1]
        u = -r / (2.0 * e) * wn  # ∂ log w / ∂ r
        c = -u  # cotangent of the backward mean b_k(x_k)
        # backward-kernel term at x_k
        gq_k = -(xk - mu) * inv_var
        g_k = (1.0 - b) * gq_k + b * ggs[k]
        a = a + c - e * (1.0 - b) * c * inv_var
        pending = pending + e * b * c
        g_eps[k - 1] += np.sum(r * r / (4.0 * e * e) * wn) + np.sum(c * g_k)
        g_beta[k] += e * np.sum(c * (ggs[k] - gq_k))
        q0_grad_terms(xk, c, e * (1.0 - b))
        if score is not None:
            gx = add_net(caches[k - 1], 2.0 * e * c)
            a = a + gx
            g_eps[k - 1] += 2.0 * np.sum(c * souts[k - 1])
        a = a + target.hvp(xk, pending)  # a is now d mean(log w) / d x_k
        # forward transition x_k = x_{k-1} + ε g_k(x_{k-1}) + √(2ε) ξ_k
        gq_p = -(xprev - mu) * inv_var
        g_p = (1.0 - b) * gq_p + b * ggs[k - 1]
        g_eps[k - 1] += np.sum(a * (g_p + xis[k - 1] / np.sqrt(2.0 * e)))
        g_beta[k] += e * np.sum(a * (ggs[k - 1] - gq_p))
        q0_grad_terms(xprev, a, e * (1.0 - b))
        a_prev = u + a - e * (1.0 - b) * a * inv_var
        pending = e * b * a
        a = a_prev
    a = a + target.hvp(xs[0], pending)  # d mean(log w) / d x_0
    # x_0 = μ + σ z and −log q0(x_0) = |z|²/2 + Σ log σ + const
    g_mu += np.sum(a, axis=0)
    g_ls += np.sum(a * (xs[0] - mu), axis=0) + float(ok.sum()) / max(int(ok.sum()), 1)
    chained = chain_params_grad(params, g_eps, g_beta)
    if "step_logit" in gradient:
        grads["step_logit"] = chained["step_logit"]
    if "schedule_logit" in gradient:
        grads["schedule_logit"] = chained["schedule_logit"]
    if "mu" in gradient:
        grads["mu"] = g_mu
    if "log_sigma" in gradient:
        grads["log_sigma"] = g_ls
    if want_net:
        grads["net"] = net_grads
    return log_w, grads


# ----------------------------------------------------------------------------- UHA
def uha_log_weights(
    target: LangevinTarget,
    params: dict,
    rng: np.random.Generator,
    n: int,
    *,
    gradient: tuple[str, ...] = (),
) -> tuple[np.ndarray, dict]:
    """Run ``n`` uncorrected Hamiltonian annealing trajectories (one leapfrog step per
    annealing step); their log-weights and ELBO gradients.

    Parameters and returns as :func:`ula_log_weights`; ``gradient`` may also contain
    ``"eta_logit"`` (the momentum persistence).
    """
    d = target.dim
    K = params["step_logit"].size
    eps = step_sizes_from_params(params)
    beta = betas_from_params(params)
    eta = eta_from_params(params)
    rho = np.sqrt(1.0 - eta * eta)
    mu = params["mu"]
    sigma = np.exp(params["log_sigma"])
    inv_var = 1.0 / sigma**2
    store = bool(gradient)

    z = rng.standard_normal((n, d))
    x = mu + sigma * z
    v = rng.standard_normal((n, d))
    log_w = 0.5 * np.sum(z * z, axis=1) + np.sum(params["log_sigma"]) + 0.5 * d * _LOG_2PI
    lp, gg = target.logp_grad(x)
    xs, ggs, vs, vps, vhs, zetas = [x], [gg], [v], [], [], []
    for k in range(1, K + 1):
        e, b = eps[k - 1], beta[k]
        zeta = rng.standard_normal((n, d))
        vp = eta * v + rho * zeta
        g_prev = (1.0 - b) * (-(x - mu) * inv_var) + b * gg
        vh = vp + 0.5 * e * g_prev
        x = x + e * vh
        lp, gg = target.logp_grad(x)
        g_new = (1.0 - b) * (-(x - mu) * inv_var) + b * gg
        v = vh + 0.5 * e * g_new
        log_w += 0.5 * np.sum(vp * vp, axis=1) - 0.5 * np.sum(v * v, axis=1)
        if store:
            xs.append(x)
            ggs.append(gg)
            vs.append(v)
            vps.append(vp)
            vhs.append(vh)
            zetas.append(zeta)
    log_w = log_w + lp
    log_w = np.where(np.isfinite(log_w), log_w, -np.inf)
    grads: dict = {"x": x}
    if not store:
        return log_w, grads
    ok = np.isfinite(log_w)[:, None]
    wn = ok / max(int(ok.sum()), 1)
    g_eps = np.zeros(K)
    g_beta = np.zeros(K + 1)
    g_mu = np.zeros(d)
    g_ls = np.zeros(d)
    g_eta = 0.0
    ax = ggs[K] * wn
    av = np.zeros((n, d))  # contributions to the adjoint of v_k from step k+1's refresh
    pending = np.zeros((n, d))

    def q0_terms(xk, cot, coef):
        nonlocal g_mu, g_ls
        g_mu += coef * np.sum(cot, axis=0) * inv_var
        g_ls += coef * 2.0 * np.sum(cot * (xk - mu), axis=0) * inv_var

    for k in range(K, 0, -1):
        e, b = eps[k - 1], beta[k]
        xk, xprev = xs[k], xs[k - 1]
        avk = av - vs[k] * wn  # −|v_k|²/2
        # v_k = v_h + (ε/2) g_k(x_k)
        gq_k = -(xk - mu) * inv_var
        g_k = (1.0 - b) * gq_k + b * ggs[k]
        g_eps[k - 1] += 0.5 * np.sum(avk * g_k)
        g_beta[k] += 0.5 * e * np.sum(avk * (ggs[k] - gq_k))
        q0_terms(xk, avk, 0.5 * e * (1.0 - b))
        ax = ax - 0.5 * e * (1.0 - b) * avk * inv_var
        pending = pending + 0.5 * e * b * avk
        ax = ax + target.hvp(xk, pending)  # complete adjoint of x_k
        avh = avk
        # x_k = x_{k-1} + ε v_h
        g_eps[k - 1] += np.sum(ax * vhs[k - 1])
        avh = avh + e * ax
        ax_prev = ax.copy()
        # v_h = v' + (ε/2) g_k(x_{k-1})
        gq_p = -(xprev - mu) * inv_var
        g_p = (1.0 - b) * gq_p + b * ggs[k - 1]
        g_eps[k - 1] += 0.5 * np.sum(avh * g_p)
        g_beta[k] += 0.5 * e * np.sum(avh * (ggs[k - 1] - gq_p))
        q0_terms(xprev, avh, 0.5 * e * (1.0 - b))
        ax_prev = ax_prev - 0.5 * e * (1.0 - b) * avh * inv_var
        pending = 0.5 * e * b * avh
        # v' = η v_{k-1} + √(1−η²) ζ, and +|v'|²/2 in log w
        avp = avh + vps[k - 1] * wn
        g_eta += np.sum(avp * (vs[k - 1] - eta / rho * zetas[k - 1]))
        av = eta * avp
        ax = ax_prev
    ax = ax + target.hvp(xs[0], pending)
    g_mu += np.sum(ax, axis=0)
    g_ls += np.sum(ax * (xs[0] - mu), axis=0) + float(ok.sum()) / max(int(ok.sum()), 1)
    chained = chain_params_grad(params, g_eps, g_beta, g_eta)
    for key in ("step_logit", "schedule_logit", "eta_logit"):
        if key in gradient:
            grads[key] = chained[key]
    if "mu" in gradient:
        grads["mu"] = g_mu
    if "log_sigma" in gradient:
        grads["log_sigma"] = g_ls
    return log_w, grads


def log_z_estimate(log_w: np.ndarray) -> tuple[float, float]:
    """``(log mean w, delta-method standard error)`` of i.i.d. log-weights."""
    lw = np.asarray(log_w, dtype=np.float64)
    return float(log_mean_exp(lw)), float(np.sqrt(log_z_relative_variance(lw)))
