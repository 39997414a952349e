"""Differentiable annealing with unadjusted kernels: ULA and UHA AIS, and the MCD weights.

Notation (ALGORITHMS.md §9). A Gaussian ``q0 = N(μ, diag σ²)`` is annealed to the
unnormalized target ``γ`` along ``log γ_k = (1 − β_k) log q0 + β_k log γ`` with
``0 = β_0 < … < β_K = 1``. No move is accepted or rejected, so every transition density is
known and the importance weight of a whole trajectory is exact:

* **ULA** — forward ``F_k(x_k | x_{k−1}) = N(x_{k−1} + ε_k ∇log γ_k(x_{k−1}), 2ε_k I)``,
  backward ``B_k(x_{k−1} | x_k) = N(x_k + ε_k ∇log γ_k(x_k) + 2ε_k s̃_k(x_k), 2ε_k I)``.
  With ``s̃ = 0`` the backward kernel is the forward kernel run from ``x_k`` (the usual
  "AIS reversal" of unadjusted Langevin annealing); a learned correction ``s̃`` gives Monte
  Carlo Diffusion (:mod:`pymc_crais.core.mcd`). Both normalizing constants are equal, so
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

* ``step_logit`` ``(K,)``: ``ε_k = max_step · sigmoid(step_logit_k)``;
* ``schedule_logit`` ``(K,)``: ``β_k = Σ_{j≤k} sigmoid(b_j) / Σ_j sigmoid(b_j)``;
* ``mu``, ``log_sigma`` ``(d,)``: the initial Gaussian;
* ``eta_logit`` ``()``: UHA's refresh ``η = 0.98 · sigmoid(u) + 0.01``.

Nothing here imports PyMC or PyTensor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .density import BatchedDensity
from .weights import log_mean_exp, log_z_relative_variance

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


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))


def _logit(p):
    p = np.asarray(p, dtype=np.float64)
    return np.log(p) - np.log1p(-p)


# ----------------------------------------------------------------------------- targets
@dataclass
class LangevinTarget:
    """Base class: the unnormalized target ``log γ`` with batched gradient and HVP.

    Subclasses implement :meth:`_logp_grad` (``(N, d) -> ((N,), (N, d))``) and
    :meth:`_hvp` (``(N, d), (N, d) -> (N, d)``: row ``i`` is ``∇²log γ(x_i) v_i``).
    Particle evaluations are counted in :attr:`n_evals` (a gradient call on ``N``
    particles adds ``N``; a Hessian-vector product adds ``N`` to :attr:`n_hvp`).
    """

    dim: int
    n_evals: int = field(default=0, init=False)
    n_hvp: int = field(default=0, init=False)

    def _logp_grad(self, x):
        raise NotImplementedError

    def _hvp(self, x, v):
        raise NotImplementedError

    def logp_grad(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(log γ(x), ∇ log γ(x))`` of every row; non-finite values: ``-inf`` and 0."""
        lp, g = self._logp_grad(x)
        self.n_evals += x.shape[0]
        lp = np.asarray(lp, dtype=np.float64)
        g = np.asarray(g, dtype=np.float64)
        bad = ~np.isfinite(lp) | (lp == np.inf)
        if bad.any() or not np.isfinite(g).all():
            lp = np.where(np.isfinite(lp), lp, -np.inf)
            g = np.where(bad[:, None] | ~np.isfinite(g), 0.0, g)
        return lp, g

    def hvp(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``∇² log γ(x_i) v_i`` for every row ``i``."""
        self.n_hvp += x.shape[0]
        out = np.asarray(self._hvp(x, v), dtype=np.float64)
        return np.where(np.isfinite(out), out, 0.0)


@dataclass
class FunctionTarget(LangevinTarget):
    """A :class:`LangevinTarget` from NumPy callables.

    Parameters
    ----------
    dim : int
    log_density, grad_log_density : callable
        ``(N, d) -> (N,)`` and ``(N, d) -> (N, d)``.
    hvp_fn : callable, optional
        ``(x, v) -> (N, d)`` Hessian-vector products. Without it, a central difference of
        the gradient along ``v`` (two gradient calls; relative error about 1e-7).
    """

    log_density: Callable | None = None
    grad_log_density: Callable | None = None
    hvp_fn: Callable | None = None

    def _logp_grad(self, x):
        return self.log_density(x), self.grad_log_density(x)

    def _hvp(self, x, v):
        if self.hvp_fn is not None:
            return self.hvp_fn(x, v)
        return _fd_hvp(lambda y: self.grad_log_density(y), x, v)


def _fd_hvp(grad, x, v):
    nv = np.sqrt(np.sum(v * v, axis=1, keepdims=True))
    scale = np.maximum(1.0, np.sqrt(np.sum(x * x, axis=1, keepdims=True) / x.shape[1]))
    h = 1e-5 * scale / np.where(nv > 0, nv, 1.0)
    g = grad(np.concatenate([x + h * v, x - h * v]))
    n = x.shape[0]
    return (g[:n] - g[n:]) / (2.0 * h)


@dataclass
class DensityTarget(LangevinTarget):
    """``log γ = log q0 + Δ`` of a :class:`~pymc_crais.core.density.BatchedDensity`.

    Parameters
    ----------
    density : BatchedDensity
        With gradients.
    hvp_fn : callable, optional
        Exact batched Hessian-vector products of ``log γ`` (e.g. compiled by PyTensor);
        without it, a central difference of the batched gradient.
    shift, scale : numpy.ndarray, optional
        Work in standardized coordinates ``y = (x − shift) / scale``: the target becomes
        ``log γ(shift + scale·y) + Σ log scale`` (the same ``Z``), which makes unit step
        sizes and a standard ``q0`` sensible whatever the model's scales.
    """

    density: BatchedDensity | None = None
    hvp_fn: Callable | None = None
    shift: np.ndarray | None = None
    scale: np.ndarray | None = None

    def __post_init__(self):
        d = self.dim
        self.shift = np.zeros(d) if self.shift is None else np.asarray(self.shift, float).ravel()
        self.scale = np.ones(d) if self.scale is None else np.asarray(self.scale, float).ravel()
        if np.any(~np.isfinite(self.scale) | (self.scale <= 0)):
            raise ValueError("scale must be positive and finite")
        self._log_jac = float(np.sum(np.log(self.scale)))

    def to_model(self, y: np.ndarray) -> np.ndarray:
        """Map standardized points back to the density's coordinates."""
        return self.shift + self.scale * y

    def _grad_x(self, x):
        ev = self.density.evaluate(x, gradient=True)
        return ev.log_q0 + ev.delta, ev.grad_log_q0 + ev.grad_delta

    def _logp_grad(self, y):
        lp, g = self._grad_x(self.to_model(y))
        return lp + self._log_jac, g * self.scale

    def _hvp(self, y, v):
        x = self.to_model(y)
        if self.hvp_fn is not None:
            return self.scale * self.hvp_fn(x, v * self.scale)
        return self.scale * _fd_hvp(lambda z: self._grad_x(z)[1], x, v * self.scale)


# ----------------------------------------------------------------------------- parameters
def init_params(
    dim: int,
    n_steps: int,
    *,
    step_size: float = 0.05,
    max_step: float = 0.25,
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
        Initial ``ε_k`` (all steps), below ``max_step``.
    max_step : float, default 0.25
        Upper bound of the learned step sizes (kept in ``params["max_step"]``).
    mean, scale : array_like, optional
        Initial Gaussian (default standard normal).
    eta : float, default 0.9
        UHA's initial momentum persistence.
    """
    if not 0 < step_size < max_step:
        raise ValueError(f"step_size must be in (0, max_step={max_step}), got {step_size}")
    mean = (
        np.zeros(dim) if mean is None else np.broadcast_to(np.asarray(mean, float), (dim,)).copy()
    )
    scale = (
        np.ones(dim) if scale is None else np.broadcast_to(np.asarray(scale, float), (dim,)).copy()
    )
    return {
        "step_logit": np.full(n_steps, float(_logit(step_size / max_step))),
        "schedule_logit": np.zeros(n_steps),
        "mu": mean,
        "log_sigma": np.log(scale),
        "eta_logit": np.array(float(_logit((eta - 0.01) / 0.98))),
        "max_step": float(max_step),
    }


def step_sizes_from_params(params: dict) -> np.ndarray:
    """``ε_k``, ``k = 1..K``."""
    return params["max_step"] * _sigmoid(params["step_logit"])


def betas_from_params(params: dict) -> np.ndarray:
    """``β_0..β_K`` (``β_0 = 0``, ``β_K = 1``)."""
    s = _sigmoid(params["schedule_logit"])
    c = np.cumsum(s)
    return np.concatenate([[0.0], c / c[-1]])


def _eta(params):
    return 0.98 * float(_sigmoid(params["eta_logit"])) + 0.01


def _chain_params_grad(params, g_eps, g_beta, g_eta=None):
    """Gradients of the unconstrained parameters from those of ``ε_k``, ``β_k`` and ``η``."""
    eps = step_sizes_from_params(params)
    s = _sigmoid(params["schedule_logit"])
    c = np.cumsum(s)
    total = c[-1]
    gb = g_beta[1:]  # β_1..β_K
    # β_k = c_k / C: ∂β_k/∂s_j = [j ≤ k]/C − c_k/C²
    g_s = np.cumsum(gb[::-1])[::-1] / total - np.sum(gb * c) / total**2
    out = {
        "step_logit": g_eps * eps * (1.0 - eps / params["max_step"]),
        "schedule_logit": g_s * s * (1.0 - s),
    }
    if g_eta is not None:
        sg = float(_sigmoid(params["eta_logit"]))
        out["eta_logit"] = np.array(g_eta * 0.98 * sg * (1.0 - sg))
    return out


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
    chained = _chain_params_grad(params, g_eps, g_beta)
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
    eta = _eta(params)
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
    chained = _chain_params_grad(params, g_eps, g_beta, g_eta)
    for key in ("step_logit", "schedule_logit", "eta_logit"):
        if key in gradient:
            grads[key] = chained[key]
    if "mu" in gradient:
        grads["mu"] = g_mu
    if "log_sigma" in gradient:
        grads["log_sigma"] = g_ls
    return log_w, grads


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


def log_z_estimate(log_w: np.ndarray) -> tuple[float, float]:
    """``(log mean w, delta-method standard error)`` of i.i.d. log-weights."""
    lw = np.asarray(log_w, dtype=np.float64)
    return float(log_mean_exp(lw)), float(np.sqrt(log_z_relative_variance(lw)))
