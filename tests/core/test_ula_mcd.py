"""ULA / UHA annealing with exact weights, their ELBO gradients, and MCD's network."""

import numpy as np
import pytest

from pymc_crais.core.learned.mcd import ResidualScore, estimate, train
from pymc_crais.core.learned.ula import (
    Adam,
    DensityTarget,
    FunctionTarget,
    betas_from_params,
    init_params,
    log_z_estimate,
    step_sizes_from_params,
    uha_log_weights,
    ula_log_weights,
)
from pymc_crais.validation.testing import linear_regression_density

D, K, N = 3, 5, 7
A = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 0.5]])


def _nonquadratic_target():
    """A non-Gaussian target with an analytic Hessian (to exercise the HVP terms)."""

    def lp(x):
        return -0.5 * np.einsum("ni,ij,nj->n", x - 1, A, x - 1) + 0.1 * np.sum(np.sin(x), 1)

    def gr(x):
        return -(x - 1) @ A + 0.1 * np.cos(x)

    def hv(x, v):
        return -v @ A - 0.1 * np.sin(x) * v

    return FunctionTarget(D, log_density=lp, grad_log_density=gr, hvp_fn=hv)


def _random_params(rng):
    p = init_params(D, K, step_size=0.1)
    p["step_logit"] += rng.normal(0, 0.3, K)
    p["schedule_logit"] += rng.normal(0, 0.5, K)
    p["mu"] = rng.normal(size=D)
    p["log_sigma"] = rng.normal(0, 0.2, D)
    p["eta_logit"] = np.array(0.4)
    return p


def _objective(method, target, p, net, score, keys):
    extra = ("net",) if method == "mcd" else ()
    if method == "uha":
        return uha_log_weights(target, p, np.random.default_rng(5), N, gradient=tuple(keys))
    return ula_log_weights(
        target,
        p,
        np.random.default_rng(5),
        N,
        score=score if method == "mcd" else None,
        net_params=net,
        gradient=tuple(keys) + extra,
    )


@pytest.mark.parametrize("method", ["ula", "mcd", "uha"])
def test_elbo_gradients_match_finite_differences(method):
    """Reverse-mode gradients through the chain (HVPs, schedule, q0, η, network) equal
    central differences of the same seeded objective."""
    target = _nonquadratic_target()
    rng = np.random.default_rng(0)
    p = _random_params(rng)
    score = ResidualScore(D, K, hidden=8, n_blocks=2)
    net = score.init(np.random.default_rng(1))
    net["W_out"] = np.random.default_rng(2).normal(0, 0.1, net["W_out"].shape)  # non-zero path
    keys = ["step_logit", "schedule_logit", "mu", "log_sigma"] + (
        ["eta_logit"] if method == "uha" else []
    )
    _, g = _objective(method, target, p, net, score, keys)
    h = 1e-6
    for key in keys:
        flat = np.atleast_1d(p[key])
        fd = np.zeros(flat.size)
        for i in range(flat.size):
            for s in (1, -1):
                q = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in p.items()}
                a = np.atleast_1d(q[key]).astype(float).copy()
                a[i] += s * h
                q[key] = a.reshape(np.shape(p[key]))
                fd[i] += s * _objective(method, target, q, net, score, keys)[0].mean() / (2 * h)
        np.testing.assert_allclose(np.atleast_1d(g[key]), fd, rtol=1e-5, atol=1e-7, err_msg=key)
    if method == "mcd":
        for key in ["W_in", "E", "W1_1", "T_0", "W2_0", "b2_1", "W_out", "b_out"]:
            arr = net[key]
            for j in range(0, arr.size, max(1, arr.size // 4)):
                ix = np.unravel_index(j, arr.shape)
                fd = 0.0
                for s in (1, -1):
                    q = {k: v.copy() for k, v in net.items()}
                    q[key][ix] += s * h
                    fd += s * _objective(method, target, p, q, score, keys)[0].mean() / (2 * h)
                assert abs(g["net"][key][ix] - fd) < 1e-7 + 1e-5 * abs(fd), (key, ix)


def test_schedule_and_step_parameterization():
    p = init_params(4, 6, step_size=0.02, max_step_size=0.2)
    np.testing.assert_allclose(step_sizes_from_params(p), 0.02)
    np.testing.assert_allclose(betas_from_params(p), np.linspace(0, 1, 7))
    with pytest.raises(ValueError, match="step_size"):
        init_params(4, 6, step_size=0.3, max_step_size=0.2)


@pytest.mark.parametrize("method", ["ula", "uha"])
def test_weights_are_unbiased_for_z(method):
    """Untrained (short, crude) annealing: mean weight still estimates Z within its MCSE."""
    dens, log_z = linear_regression_density(n=20, d=2, sigma=1.0, seed=3)
    target = DensityTarget(2, density=dens)
    p = init_params(2, 8, step_size=0.05)
    lw = estimate(target, p, np.random.default_rng(11), 20000, method=method)
    est, mcse = log_z_estimate(lw)
    assert mcse < 0.1
    assert abs(est - log_z) < 4 * mcse, (est, log_z, mcse)


def test_mcd_starts_from_the_ula_reversal_and_is_reproducible():
    target = _nonquadratic_target()
    p = init_params(D, K, step_size=0.1)
    score = ResidualScore(D, K, hidden=8)
    net = score.init(np.random.default_rng(0))
    lw_ula, _ = ula_log_weights(target, p, np.random.default_rng(3), 50)
    lw_mcd, _ = ula_log_weights(
        target, p, np.random.default_rng(3), 50, score=score, net_params=net
    )
    np.testing.assert_array_equal(lw_ula, lw_mcd)
    r1 = train(
        target, p, np.random.default_rng(4), method="mcd", train_steps=5, batch=16, score=score
    )
    r2 = train(
        target, p, np.random.default_rng(4), method="mcd", train_steps=5, batch=16, score=score
    )
    np.testing.assert_array_equal(r1.elbo, r2.elbo)
    np.testing.assert_array_equal(r1.net_params["W_out"], r2.net_params["W_out"])


def test_training_raises_the_elbo_and_mcd_beats_ula():
    """N(3, I) -> N(0, I) in d = 5, K = 16 (Table 1's setting, small): learning the step sizes
    raises the ELBO; MCD's learned backward kernels raise it further and its log Z is
    within its MCSE of 0."""
    d, k = 5, 16
    target = FunctionTarget(
        d,
        log_density=lambda x: -0.5 * np.sum(x * x, 1) - 0.5 * d * np.log(2 * np.pi),
        grad_log_density=lambda x: -x,
        hvp_fn=lambda x, v: -v,
    )
    p = init_params(d, k, step_size=0.05, mean=3.0)
    ula = train(
        target, p, np.random.default_rng(1), method="ula", train_steps=150, batch=32, lr=0.05
    )
    score = ResidualScore(d, k, hidden=16)
    mcd = train(
        target,
        p,
        np.random.default_rng(1),
        method="mcd",
        train_steps=150,
        batch=32,
        lr=0.05,
        net_lr=0.01,
        score=score,
    )
    assert ula.elbo[-10:].mean() > ula.elbo[:10].mean() + 5
    assert mcd.elbo[-10:].mean() > ula.elbo[-10:].mean()
    lw = estimate(target, mcd, np.random.default_rng(2), 4000, method="mcd", score=score)
    est, mcse = log_z_estimate(lw)
    assert abs(est) < 4 * mcse + 0.01, (est, mcse)


def test_train_rejects_unknown_parameters():
    target = _nonquadratic_target()
    p = init_params(D, K)
    with pytest.raises(ValueError, match="eta_logit"):
        train(
            target, p, np.random.default_rng(0), method="ula", learn=("eta_logit",), train_steps=1
        )
    with pytest.raises(ValueError, match="method"):
        train(target, p, np.random.default_rng(0), method="nuts", train_steps=1)


def test_adam_ascends_a_quadratic():
    params = {"a": np.array([3.0, -2.0])}
    opt = Adam(lr=0.1)
    for _ in range(300):
        opt.step(params, {"a": -2 * params["a"]})
    np.testing.assert_allclose(params["a"], 0.0, atol=1e-2)


def test_density_target_standardization_keeps_z_and_gradients():
    dens, _ = linear_regression_density(n=10, d=3, seed=1)
    shift, scale = np.array([0.1, -0.2, 0.3]), np.array([0.5, 2.0, 1.5])
    t = DensityTarget(3, density=dens, shift=shift, scale=scale)
    t0 = DensityTarget(3, density=dens)
    y = np.random.default_rng(0).normal(size=(4, 3))
    lp, g = t.logp_grad(y)
    lp0, g0 = t0.logp_grad(shift + scale * y)
    np.testing.assert_allclose(lp, lp0 + np.log(scale).sum())
    np.testing.assert_allclose(g, g0 * scale)
    v = np.random.default_rng(1).normal(size=(4, 3))
    hv_fd = t.hvp(y, v)
    h = 1e-6
    hv_num = (t.logp_grad(y + h * v)[1] - t.logp_grad(y - h * v)[1]) / (2 * h)
    np.testing.assert_allclose(hv_fd, hv_num, rtol=1e-5, atol=1e-6)
