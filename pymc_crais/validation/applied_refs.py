"""The two-way references of the applied tier (see ``applied_models``): quadrature and
importance sampling, never SMC or AIS."""

from __future__ import annotations

import numpy as np
from scipy import optimize, special, stats

from .applied_numeric import (
    LOG2PI,
    GaussianSpec,
    ISSpec,
    grid_log_integral,
    grow_box,
    laplace_k,
    panel_nodes,
)
from .numeric import logmeanexp_with_mcse, pareto_khat

__all__ = ["gaussian_reference", "is_reference"]


def gaussian_reference(spec: GaussianSpec, seed: int = 0) -> dict:
    """Both ways for a :class:`GaussianSpec` (see the module docstring)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):  # many small factorizations: threads only contend
        return _gaussian_reference(spec, seed)


def _gaussian_reference(spec, seed):
    k = len(spec.hyper)
    mode, cov = laplace_k(spec.fast, k)
    sd = np.sqrt(np.diag(cov))
    lo, hi = grow_box(spec.fast, mode, sd, lo=spec.lo or None, hi=spec.hi or None)
    n = spec.nodes or {1: 12, 2: 8, 3: 5}[k]
    q1, _ = grid_log_integral(spec.fast, lo, hi, mode, sd, n)
    q2, n_nodes = grid_log_integral(spec.fast, lo, hi, mode, sd, n + 3)
    # way 2: IS from a t_4 at the Laplace fit, 1.5 × its scale, dense marginal
    df, scale = spec.is_df, spec.is_scale
    prop = stats.multivariate_t(loc=mode, shape=scale**2 * cov, df=df)
    rng = np.random.default_rng(seed)
    U = prop.rvs(size=spec.n_is, random_state=rng).reshape(spec.n_is, k)
    lw = np.concatenate([spec.dense(U[i : i + 25]) for i in range(0, spec.n_is, 25)])
    lw = lw - prop.logpdf(U).reshape(-1)
    n_fail = int(np.sum(~np.isfinite(lw)))
    est, mcse, ess = logmeanexp_with_mcse(np.where(np.isfinite(lw), lw, -np.inf))
    way1 = {"method": f"composite Gauss-Legendre quadrature over {k} unconstrained "
                      f"hyperparameter(s), {n + 3} nodes a panel ({n_nodes} in all) on the box "
                      f"{np.round(lo, 2).tolist()} - {np.round(hi, 2).tolist()}, structured "
                      f"marginal; error = change from {n} nodes a panel",
            "log_z": q2, "error": abs(q2 - q1)}  # fmt: skip
    way2 = {"method": f"importance sampling over the hyperparameters, t_{df:g} at the Laplace "
                      f"fit x {scale}, {spec.n_is} draws, dense-covariance marginal (Cholesky)",
            "log_z": est, "mcse": mcse, "khat": pareto_khat(lw), "ess": ess, "seed": seed,
            "n_singular": n_fail}  # fmt: skip
    diff = q2 - est
    return {
        "log_z": q2,
        "mcse": 0.0,
        "reference": "exact",
        "method": f"quadrature of the analytic marginal {q2:.4f} (err {abs(q2 - q1):.1e}); "
        f"cross-check IS {est:.4f} ± {mcse:.4f}",
        "way1": way1,
        "way2": way2,
        "difference": diff,
        "agree": bool(abs(diff) < 4 * mcse + 1e-3),
    }



def _is(bl, n, seed, comps, df, batch=5000):
    """IS from an equal-weight mixture of Student-t's ``comps = [(loc, cov), ...]``."""
    props = [stats.multivariate_t(loc=m, shape=c, df=df) for m, c in comps]
    rng = np.random.default_rng(seed)
    lw = np.empty(n)
    for i in range(0, n, batch):
        m = min(batch, n - i)
        which = rng.integers(len(props), size=m)
        x = np.concatenate([props[k].rvs(size=int(np.sum(which == k)), random_state=rng)
                            .reshape(-1, bl.d) for k in range(len(props))])  # fmt: skip
        lq = special.logsumexp([p.logpdf(x).reshape(-1) for p in props], axis=0) - np.log(
            len(props)
        )
        lw[i : i + m] = np.asarray(bl.logp(x), dtype=float) - lq
    lw = np.where(np.isfinite(lw), lw, -np.inf)
    est, mcse, ess = logmeanexp_with_mcse(lw)
    return lw, {"log_z": est, "mcse": mcse, "khat": pareto_khat(lw), "ess": ess, "n": n,
                "seed": seed}  # fmt: skip


def is_reference(spec: ISSpec, seed: int = 0) -> dict:
    """Both ways for an :class:`ISSpec`: importance sampling on the model's joint density
    from (1) a t_5 at the Laplace fit (scale ``spec.scale1``), and (2) a t_3 at the posterior
    mean and covariance estimated by a separate weighted pilot of (1), scale 1.5;
    for a label-switching model, each proposal is the equal mixture of its relabelled
    copies (so both copies of the posterior are covered)."""
    from threadpoolctl import threadpool_limits

    from .numeric import batched_logp, laplace

    bl = batched_logp((spec.ref_model or spec.model)())
    if spec.conditional is not None:
        with threadpool_limits(limits=1):
            return _conditional_reference(spec, bl, seed)
    with threadpool_limits(limits=1):
        mode, cov, converged = laplace(bl, None if spec.x0 is None else spec.x0(bl))
        perms = [np.eye(bl.d)] if spec.relabel is None else [np.eye(bl.d), spec.relabel(bl)]
        c1 = [(P @ mode, spec.scale1**2 * P @ cov @ P.T) for P in perms]
        if spec.quadrature:
            w1 = _joint_quadrature(bl, mode, cov)
        else:
            _, w1 = _is(bl, spec.n_is, seed, c1, 5.0)
        # way 2: moments of the posterior (one relabelling) from a separate pilot of way 1's
        # single-copy proposal, then a different (heavier, wider) proposal at them
        lwp, _ = _is(bl, 20_000, seed + 1000, c1[:1], 5.0)
        rng = np.random.default_rng(seed + 1000)  # the pilot's draws, regenerated
        xp = _pilot_draws(c1[0], 20_000, rng, bl.d)
        wp = np.exp(lwp - lwp.max())
        wp /= wp.sum()
        mean2 = wp @ xp
        cov2 = (xp - mean2).T @ ((xp - mean2) * wp[:, None])
        c2 = [(P @ mean2, 1.5**2 * P @ cov2 @ P.T) for P in perms]
        _, w2 = _is(bl, spec.n_is, seed + 1, c2, 3.0)
    diff = w1["log_z"] - w2["log_z"]
    if spec.quadrature:  # the quadrature is the reference, the IS its check
        return {
            "log_z": w1["log_z"], "mcse": 0.0, "reference": "exact",
            "method": f"quadrature of the joint density {w1['log_z']:.4f} (err "
                      f"{w1['error']:.1e}); cross-check IS {w2['log_z']:.4f} ± {w2['mcse']:.4f}",
            "way1": w1, "way2": w2, "difference": float(diff),
            "laplace_converged": bool(converged),
            "agree": bool(abs(diff) < 4 * w2["mcse"] + 1e-3 and w2["khat"] < 0.7),
        }  # fmt: skip
    v1, v2 = w1["mcse"] ** 2, w2["mcse"] ** 2
    mean = (w1["log_z"] / v1 + w2["log_z"] / v2) / (1 / v1 + 1 / v2)
    mcse = max((1 / v1 + 1 / v2) ** -0.5, abs(diff) / 2)
    mix = " (equal mixture over both labellings)" if spec.relabel is not None else ""
    if not spec.quadrature:
        w1["method"] = (f"IS on the model, t_5 at the Laplace mode, {spec.scale1} x its scale, "
                        f"{spec.n_is} draws{mix}")
    w2["method"] = (f"IS on the model, t_3 at the posterior mean/covariance estimated by a "
                    f"20000-draw pilot of way 1, 1.5 x scale, {spec.n_is} draws{mix}")
    return {
        "log_z": float(mean),
        "mcse": float(mcse),
        "reference": "reference",
        "method": f"inverse-variance mean of two IS proposals: {w1['log_z']:.4f} ± "
        f"{w1['mcse']:.4f} (k̂ {w1['khat']:.2f}), {w2['log_z']:.4f} ± {w2['mcse']:.4f} "
        f"(k̂ {w2['khat']:.2f})",
        "way1": w1,
        "way2": w2,
        "difference": float(diff),
        "laplace_converged": bool(converged),
        "agree": bool(abs(diff) < 4 * np.sqrt(v1 + v2) + 1e-3
                      and max(w1["khat"], w2["khat"]) < 0.7),
    }


class _Conditional:
    """Fits of the posterior of all coordinates but one (``u``) given ``u``."""

    def __init__(self, bl, name):
        sizes = [int(np.prod(sh, dtype=int)) for sh in bl.shapes]
        self.iu = int(np.cumsum([0, *sizes])[bl.names.index(name)])
        self.rest = np.setdiff1d(np.arange(bl.d), [self.iu])
        self.bl, self.start = bl, np.zeros(bl.d - 1)

    def full(self, u, xr):
        x = np.empty(xr.shape[:-1] + (self.bl.d,))
        x[..., self.iu] = u
        x[..., self.rest] = xr
        return x

    def fit(self, u):
        """Conditional mode and covariance (Newton from the last mode, FD Hessian)."""
        bl = self.bl

        def f(xr):
            return -float(bl.logp(self.full(u, xr)[None])[0])

        def g(xr):
            return -np.asarray(bl.dlogp(self.full(u, xr)))[self.rest]

        res = optimize.minimize(f, self.start, jac=g, method="BFGS", options={"gtol": 1e-9})
        x = res.x
        m = x.size
        H = np.empty((m, m))
        for j in range(m):
            e = np.zeros(m)
            e[j] = 1e-5
            H[:, j] = (g(x + e) - g(x - e)) / 2e-5
        H = 0.5 * (H + H.T)
        self.start = x
        cov = np.linalg.inv(H)
        return x, 0.5 * (cov + cov.T), -res.fun

    def laplace_log(self, u):
        x, cov, top = self.fit(u)
        return top + 0.5 * x.size * LOG2PI + 0.5 * np.linalg.slogdet(cov)[1]


def _conditional_reference(spec, bl, seed) -> dict:
    """Way 1: quadrature over the scale ``u`` of the conditional evidence, each by IS from a
    t_5 at the conditional Laplace fit; way 2: IS on the joint density from ``t(u) ×
    N(x; m(u), S(u))``, the conditional fits interpolated linearly in ``u`` (a valid
    proposal whatever the interpolation's accuracy)."""
    c = _Conditional(bl, spec.conditional)
    grid = np.linspace(-4.0, 2.0, 25)
    prof = np.array([c.laplace_log(u) for u in grid])
    k = int(np.argmax(prof))
    # refine the profile's mode and curvature on a fine local grid
    fine = np.linspace(grid[max(k - 2, 0)], grid[min(k + 2, 24)], 21)
    c.start = np.zeros(bl.d - 1)
    pf = np.array([c.laplace_log(u) for u in fine])
    j = int(np.argmax(pf))
    mode_u = fine[j]
    h = fine[1] - fine[0]
    curv = -(pf[min(j + 1, 20)] - 2 * pf[j] + pf[max(j - 1, 0)]) / h**2
    sd_u = 1 / np.sqrt(max(curv, 1e-6))
    lo, hi = grow_box(lambda U: np.array([c.laplace_log(u) for u in U[:, 0]]),
                       np.array([mode_u]), np.array([sd_u]), drop=30.0)  # fmt: skip
    nodes, logw = panel_nodes(lo[0], hi[0], mode_u, sd_u, 6)
    rng = np.random.default_rng(seed)
    fits, vals, ses = [], [], []
    c.start = np.zeros(bl.d - 1)
    for u in nodes:
        x, cov, _ = c.fit(u)
        fits.append((x, cov))
        prop = stats.multivariate_t(loc=x, shape=1.1**2 * cov, df=5.0)
        xr = prop.rvs(size=4000, random_state=rng)
        lw = np.asarray(bl.logp(c.full(u, xr)), dtype=float) - prop.logpdf(xr)
        est, se, _ = logmeanexp_with_mcse(lw)
        vals.append(est)
        ses.append(se)
    vals, ses = np.array(vals), np.array(ses)
    q = special.logsumexp(vals + logw)
    wts = np.exp(vals + logw - q)
    way1 = {"method": f"composite Gauss-Legendre quadrature over {spec.conditional} "
                      f"({nodes.size} nodes on [{lo[0]:.2f}, {hi[0]:.2f}]) of the conditional "
                      f"evidence, each by IS from a t_5 at the conditional Laplace fit (4000 "
                      f"draws)", "log_z": float(q), "mcse": float(np.sqrt(np.sum((wts * ses) ** 2)))}  # fmt: skip
    # way 2
    order = np.argsort(nodes)
    nodes_s = nodes[order]
    M = np.stack([fits[i][0] for i in order])
    L = np.stack([np.linalg.cholesky(fits[i][1]) for i in order])
    tu = stats.t(df=4.0, loc=mode_u, scale=1.5 * sd_u)
    n = spec.n_is // 2
    rng2 = np.random.default_rng(seed + 1)
    us = tu.rvs(size=n, random_state=rng2)
    pos = np.clip(np.searchsorted(nodes_s, us) - 1, 0, nodes_s.size - 2)
    t = np.clip((us - nodes_s[pos]) / (nodes_s[pos + 1] - nodes_s[pos]), 0.0, 1.0)[:, None]
    mu = (1 - t) * M[pos] + t * M[pos + 1]
    Lu = (1 - t[..., None]) * L[pos] + t[..., None] * L[pos + 1]
    zz = rng2.standard_normal(size=mu.shape)
    xr = mu + np.einsum("nij,nj->ni", Lu, zz)
    logq = (tu.logpdf(us) - 0.5 * (zz**2).sum(1) - 0.5 * mu.shape[1] * LOG2PI
            - np.log(np.abs(np.diagonal(Lu, axis1=1, axis2=2))).sum(1))  # fmt: skip
    X = c.full(us, xr)
    lp = np.concatenate([bl.logp(X[i : i + 5000]) for i in range(0, n, 5000)])
    lw = np.where(np.isfinite(lp), lp - logq, -np.inf)
    est, se, ess = logmeanexp_with_mcse(lw)
    way2 = {"method": f"IS on the joint density from t_4({spec.conditional}) x the "
                      f"interpolated conditional Laplace Gaussian, {n} draws",
            "log_z": est, "mcse": se, "khat": pareto_khat(lw), "ess": ess, "seed": seed + 1}  # fmt: skip
    diff = way1["log_z"] - est
    v1, v2 = way1["mcse"] ** 2, se**2
    mean = (way1["log_z"] / v1 + est / v2) / (1 / v1 + 1 / v2)
    return {
        "log_z": float(mean),
        "mcse": float(max((1 / v1 + 1 / v2) ** -0.5, abs(diff) / 2)),
        "reference": "reference",
        "method": f"inverse-variance mean: quadrature x conditional IS {way1['log_z']:.4f} ± "
        f"{way1['mcse']:.4f}, joint IS {est:.4f} ± {se:.4f} (k̂ {way2['khat']:.2f})",
        "way1": way1,
        "way2": way2,
        "difference": float(diff),
        "agree": bool(abs(diff) < 4 * np.sqrt(v1 + v2) + 1e-3 and way2["khat"] < 0.7),
    }


def _joint_quadrature(bl, mode, cov) -> dict:
    """Way 1 for ``d <= 3``: composite Gauss–Legendre quadrature of the model's own joint
    density over its unconstrained coordinates (no analytic step)."""
    sd = np.sqrt(np.diag(cov))

    def f(U):
        return np.asarray(bl.logp(U), dtype=float)

    lo, hi = grow_box(f, mode, sd)
    n = {1: 12, 2: 8, 3: 5}[bl.d]
    q1, _ = grid_log_integral(f, lo, hi, mode, sd, n)
    q2, n_nodes = grid_log_integral(f, lo, hi, mode, sd, n + 3)
    return {"method": f"composite Gauss-Legendre quadrature of the joint density over all "
                      f"{bl.d} unconstrained coordinates, {n_nodes} nodes, box "
                      f"{np.round(lo, 2).tolist()} - {np.round(hi, 2).tolist()}; error = change "
                      f"from {n} nodes a panel", "log_z": q2, "error": abs(q2 - q1)}  # fmt: skip


def _pilot_draws(comp, n, rng, d, batch=5000):
    """The draws :func:`_is` makes from one component with generator ``rng`` (same order)."""
    prop = stats.multivariate_t(loc=comp[0], shape=comp[1], df=5.0)
    out = []
    for i in range(0, n, batch):
        m = min(batch, n - i)
        rng.integers(1, size=m)
        out.append(prop.rvs(size=m, random_state=rng).reshape(-1, d))
    return np.concatenate(out)


