"""Independent numerical evidence estimates for the validation suite.

Nothing here uses the package's samplers: these are the reference computations the samplers
are judged against.

* :func:`batched_logp`: the model's joint log density (with the Jacobians of PyMC's
  transforms) on the flat unconstrained vector, evaluated for a batch of points at once.
* :func:`laplace`: the mode and the inverse Hessian there.
* :func:`importance_sampling`: ``log Z`` by importance sampling from a multivariate Student-t
  centred at the mode, with its MCSE (delta method), Pareto k̂ (``arviz_stats``) and ESS.
* :func:`bridge_sampling`: ``log Z`` by the iterative bridge sampler of Meng & Wong on
  posterior draws (NUTS), with a Gaussian proposal fitted to the draws, MCSE by batch means.
* :func:`quad_log`: ``log ∫ exp(f)`` in one dimension with scipy.integrate.quad, shifting by
  the maximum so the integrand is O(1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import integrate, optimize, special, stats

__all__ = [
    "BatchedLogp",
    "batched_logp",
    "bridge_sampling",
    "importance_sampling",
    "laplace",
    "nuts_draws",
    "quad_log",
]


@dataclass
class BatchedLogp:
    """A compiled joint log density on the flat unconstrained parameter vector."""

    logp: callable  # (m, d) -> (m,)
    dlogp: callable  # (d,) -> (d,)
    x0: np.ndarray  # the model's initial point, flattened
    names: list  # value-variable names, in flat order
    shapes: list  # their shapes
    d: int

    def unflatten(self, x: np.ndarray) -> dict:
        out, i = {}, 0
        for name, shape in zip(self.names, self.shapes, strict=True):
            size = int(np.prod(shape, dtype=int))
            out[name] = x[..., i : i + size].reshape(x.shape[:-1] + tuple(shape))
            i += size
        return out


def batched_logp(model) -> BatchedLogp:
    """Compile ``model.logp()`` (Jacobians included) for a batch of flat unconstrained points."""
    import pytensor
    import pytensor.tensor as pt
    from pymc.pytensorf import join_nonshared_inputs
    from pytensor.graph.replace import vectorize_graph

    if any(v.dtype.startswith("int") for v in model.value_vars):
        raise ValueError("batched_logp needs a model whose free variables are all continuous")
    point = model.initial_point()
    names = [v.name for v in model.value_vars]
    shapes = [np.shape(point[n]) for n in names]
    logp = model.logp(jacobian=True)
    dlogp = pt.grad(logp, model.value_vars)
    [logp_flat, *grads], flat_in = join_nonshared_inputs(point, [logp, *dlogp], model.value_vars)
    grad_flat = pt.concatenate([g.ravel() for g in grads])
    X = pt.matrix("X", dtype=flat_in.dtype)
    logp_batch = vectorize_graph(logp_flat, replace={flat_in: X})
    f = pytensor.function([X], logp_batch)
    g = pytensor.function([flat_in], grad_flat)
    x0 = np.concatenate([np.ravel(point[n]) for n in names]).astype(np.float64)
    return BatchedLogp(f, g, x0, names, shapes, x0.size)


def laplace(bl: BatchedLogp, x0=None, eps: float = 1e-5):
    """Mode (BFGS, then a Newton polish) and covariance = inverse of −Hessian (central
    differences of the gradient). Returns ``(mode, cov, converged)``."""
    x0 = bl.x0 if x0 is None else np.asarray(x0, dtype=float)

    def fun(x):
        return -float(bl.logp(x[None])[0])

    def jac(x):
        return -np.asarray(bl.dlogp(x), dtype=float)

    res = optimize.minimize(
        fun, x0, jac=jac, method="BFGS", options={"gtol": 1e-8, "maxiter": 20_000}
    )
    x = res.x
    for _ in range(3):
        H = _neg_hessian(bl, x, eps)
        step = np.linalg.solve(H, -jac(x))
        x = x + step
        if np.max(np.abs(step)) < 1e-10:
            break
    H = _neg_hessian(bl, x, eps)
    cov = np.linalg.inv(H)
    cov = 0.5 * (cov + cov.T)
    converged = bool(np.max(np.abs(jac(x))) < 1e-4 and np.all(np.linalg.eigvalsh(cov) > 0))
    return x, cov, converged


def _neg_hessian(bl, x, eps):
    d = x.size
    H = np.empty((d, d))
    for j in range(d):
        e = np.zeros(d)
        e[j] = eps * max(1.0, abs(x[j]))
        H[:, j] = -(np.asarray(bl.dlogp(x + e)) - np.asarray(bl.dlogp(x - e))) / (2 * e[j])
    return 0.5 * (H + H.T)


def logmeanexp_with_mcse(logw: np.ndarray):
    """log mean exp(logw) and its delta-method standard error (iid draws)."""
    n = logw.size
    m = np.max(logw)
    w = np.exp(logw - m)
    mean = w.mean()
    est = m + np.log(mean)
    mcse = float(np.std(w, ddof=1) / np.sqrt(n) / mean)
    ess = float(w.sum() ** 2 / np.sum(w * w))
    return float(est), mcse, ess


def pareto_khat(logw: np.ndarray) -> float:
    """Pareto k̂ of the right tail of importance ratios given on log scale (arviz_stats)."""
    from arviz_stats.base.array import array_stats

    # the ratios themselves (scaled by their maximum): arviz_stats' ``log_weights=True`` path
    # fits the generalized Pareto tail to the log values, which is not the PSIS k̂
    logw = np.asarray(logw, dtype=float)
    w = np.exp(logw - np.max(logw))[None, :]
    return float(array_stats.pareto_khat(w, chain_axis=-2, draw_axis=-1, r_eff=1.0, tail="right"))


def importance_sampling(
    bl: BatchedLogp,
    n: int = 100_000,
    df: float = 5.0,
    scale: float = 1.2,
    seed: int = 0,
    batch: int = 5_000,
    mode=None,
    cov=None,
) -> dict:
    """``log Z`` by importance sampling from ``t_df(mode, scale² · cov)``.

    Returns a dict with ``log_z``, ``mcse`` (delta method, iid), ``khat`` (Pareto k̂ of the
    weights; below 0.5 the variance is finite and the MCSE is trustworthy), ``ess``, the
    proposal settings and whether the Laplace fit converged.
    """
    converged = True
    if mode is None or cov is None:
        mode, cov, converged = laplace(bl)
    d = bl.d
    prop = stats.multivariate_t(loc=mode, shape=scale**2 * cov, df=df, allow_singular=False)
    rng = np.random.default_rng(seed)
    logw = np.empty(n)
    for i in range(0, n, batch):
        m = min(batch, n - i)
        x = prop.rvs(size=m, random_state=rng).reshape(m, d)
        logw[i : i + m] = np.asarray(bl.logp(x), dtype=float) - prop.logpdf(x)
    logw = np.where(np.isfinite(logw), logw, -np.inf)
    est, mcse, ess = logmeanexp_with_mcse(logw)
    return {
        "method": f"importance sampling from a Student-t (df={df}) at the Laplace mode, "
        f"scale {scale} x Laplace covariance, {n} draws",
        "log_z": est,
        "mcse": mcse,
        "khat": pareto_khat(logw),
        "ess": ess,
        "n": n,
        "laplace_converged": converged,
        "seed": seed,
    }


def nuts_draws(model, draws: int = 2000, tune: int = 1000, chains: int = 4, seed: int = 0, **kw):
    """Posterior draws by PyMC's NUTS as an array ``(chains, draws, d)`` on the flat
    unconstrained space (models whose free variables have no transform)."""
    import pymc as pm

    for rv in model.free_RVs:
        if model.rvs_to_transforms.get(rv) is not None:
            raise ValueError(
                f"nuts_draws supports untransformed variables only; {rv.name} has a transform"
            )
    with model:
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=chains,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            **kw,
        )
    names = [v.name for v in model.value_vars]
    post = idata["posterior"]
    parts = [np.asarray(post[n].values).reshape(chains, draws, -1) for n in names]
    return np.concatenate(parts, axis=-1)


def bridge_sampling(
    bl: BatchedLogp,
    draws: np.ndarray,
    n_proposal: int | None = None,
    seed: int = 0,
    n_batches: int = 8,
    tol: float = 1e-10,
) -> dict:
    """``log Z`` by iterative bridge sampling (Meng & Wong 1996, the optimal bridge) between
    the posterior, represented by ``draws`` ``(chains, n, d)``, and a Gaussian fitted to the
    first half of each chain; the second halves are the posterior sample of the bridge.
    The MCSE is the standard deviation of the estimates on ``n_batches`` contiguous batches
    of the second halves (each with as many proposal draws) divided by √n_batches.
    """
    draws = np.asarray(draws, dtype=float)
    C, n, d = draws.shape
    fit = draws[:, : n // 2].reshape(-1, d)
    post = draws[:, n // 2 :].reshape(-1, d)
    mu, cov = fit.mean(0), np.cov(fit, rowvar=False).reshape(d, d)
    prop = stats.multivariate_normal(mu, cov)
    rng = np.random.default_rng(seed)
    n2 = post.shape[0] if n_proposal is None else n_proposal
    q = prop.rvs(size=n2, random_state=rng).reshape(n2, d)
    lp_post = np.concatenate([bl.logp(post[i : i + 5000]) for i in range(0, len(post), 5000)])
    lq_post = prop.logpdf(post)
    lp_prop = np.concatenate([bl.logp(q[i : i + 5000]) for i in range(0, n2, 5000)])
    lq_prop = prop.logpdf(q)

    def solve(l1, l2):
        # l1 = log p/q on posterior draws, l2 = log p/q on proposal draws
        n1_, n2_ = l1.size, l2.size
        s1, s2 = n1_ / (n1_ + n2_), n2_ / (n1_ + n2_)
        r = np.median(l1)  # start
        for _ in range(1000):
            num = special.logsumexp(l2 - np.logaddexp(np.log(s1) + l2 - r, np.log(s2))) - np.log(
                n2_
            )
            den = special.logsumexp(-np.logaddexp(np.log(s1) + l1 - r, np.log(s2))) - np.log(n1_)
            r_new = num - den
            if abs(r_new - r) < tol:
                return float(r_new)
            r = r_new
        return float(r)

    l1, l2 = lp_post - lq_post, lp_prop - lq_prop
    est = solve(l1, l2)
    b1, b2 = (
        np.array_split(np.arange(l1.size), n_batches),
        np.array_split(np.arange(l2.size), n_batches),
    )
    per = np.array([solve(l1[i], l2[j]) for i, j in zip(b1, b2, strict=True)])
    mcse = float(np.std(per, ddof=1) / np.sqrt(n_batches))
    return {
        "method": f"bridge sampling (optimal bridge, Gaussian proposal) on NUTS draws: "
        f"{C} chains x {n} draws (second halves), {n2} proposal draws",
        "log_z": est,
        "mcse": mcse,
        "batch_estimates": per.tolist(),
    }


def quad_log(f, a: float, b: float, center: float | None = None, points=None, **kw) -> float:
    """``log ∫_a^b exp(f(x)) dx`` for a scalar log-integrand ``f``: the maximum of ``f`` is
    found first (bounded search around ``center``) and subtracted."""
    if center is None:
        lo, hi = (a if np.isfinite(a) else -50.0), (b if np.isfinite(b) else 50.0)
        grid = np.linspace(lo, hi, 2001)
        try:  # vectorized integrand
            vals = np.asarray(f(grid), dtype=float)
            if vals.shape != grid.shape:
                raise ValueError
        except (TypeError, ValueError, IndexError):  # a scalar-only integrand
            vals = np.array([f(x) for x in grid])
        center = float(grid[np.nanargmax(vals)])
    fmax = float(f(center))
    opts = {"epsabs": 0.0, "epsrel": 1e-11, "limit": 500}
    opts.update(kw)
    if points is None and np.isfinite(a) and np.isfinite(b):
        points = [center]
    if points is not None and np.isfinite(a) and np.isfinite(b):
        val, _ = integrate.quad(lambda x: np.exp(f(x) - fmax), a, b, points=points, **opts)
    else:
        # split at the maximum so quad sees the bulk
        v1, _ = integrate.quad(lambda x: np.exp(f(x) - fmax), a, center, **opts)
        v2, _ = integrate.quad(lambda x: np.exp(f(x) - fmax), center, b, **opts)
        val = v1 + v2
    return float(fmax + np.log(val))
