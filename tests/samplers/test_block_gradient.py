"""Groups of points sharing their hyperparameters, with the gradient in the latent block alone
(engine/block_gradient.py and ``BatchedDensity.evaluate_grouped``): compiled only where it
saves matrix work, equal to the whole gradient's columns, used by the conditional start with
one copy a θ draw."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_crais as pmc
from pymc_crais.core.density import FunctionDensity
from pymc_crais.samplers.engine import conditional_start as cs
from pymc_crais.samplers.engine.block_gradient import add_block_gradient, matrix_nodes
from pymc_crais.samplers.engine.compile import compile_model_density, parameter_layout
from pymc_crais.samplers.engine.mapping import _unique_rows, posterior_mapper
from pymc_crais.samplers.engine.prior import PriorSampler


def _gp(n=12):
    rng = np.random.default_rng(3)
    X = np.sort(rng.uniform(0.0, 5.0, n))
    y = np.sin(X) + rng.normal(0.0, 0.3, n)
    with pm.Model() as model:
        ell = pm.Gamma("ell", 2.0, 1.0)
        eta = pm.HalfNormal("eta", 1.0)
        f = pm.gp.Latent(cov_func=eta**2 * pm.gp.cov.ExpQuad(1, ls=ell)).prior("f", X=X[:, None])
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("y", f, sigma, observed=y)
    return model


def _hier():
    y = np.array([1.2, -0.3, 0.8, 2.1, 0.4])
    with pm.Model() as model:
        tau = pm.HalfNormal("tau", 1.0)
        z = pm.Normal("z", 0.0, tau, shape=5)
        pm.Normal("y", z, 1.0, observed=y)
    return model


def _latent(model):
    layout = parameter_layout(model)
    blocks = cs.model_blocks(model, layout)
    return layout, blocks


def _points(model, n=6):
    layout = parameter_layout(model)
    return PriorSampler(model, layout).draw(np.random.default_rng(1), n)


def _grouped(model, blocks, m=4, k=3):
    """``(M, k, d)`` points whose groups share their hyperparameters."""
    x = _points(model, m * k).reshape(m, k, -1)
    x[:, :, blocks.hyper] = x[:, :1, blocks.hyper]
    return x


def test_a_latent_gp_gets_its_grouped_gradient_equal_to_the_whole_ones_columns():
    model = _gp()
    layout, blocks = _latent(model)
    dens = compile_model_density(model)
    x = _grouped(model, blocks)
    whole = dens.evaluate(x.reshape(-1, layout.dim), gradient=True)
    assert add_block_gradient(model, dens, blocks.latent, {})
    assert tuple(blocks.latent.tolist()) in dens.block_functions
    before = dens.n_evals
    part = dens.evaluate_grouped(x, blocks.latent)
    assert dens.n_evals - before == 12
    assert part.grad_delta.shape == (4, 3, blocks.latent.size) and part.delta.shape == (4, 3)
    # the kernel matrix's factor once a group instead of once a point: rounding differs
    np.testing.assert_allclose(part.log_q0.ravel(), whole.log_q0, rtol=1e-9)
    np.testing.assert_allclose(part.delta.ravel(), whole.delta, rtol=1e-9)
    for name in ("grad_log_q0", "grad_delta"):
        np.testing.assert_allclose(getattr(part, name).reshape(12, -1),
                                   getattr(whole, name)[:, blocks.latent],
                                   rtol=1e-7, atol=1e-8)  # fmt: skip
    # once compiled, a second density of the model finds it cached
    again = compile_model_density(model)
    assert add_block_gradient(model, again, blocks.latent, {})
    assert again.block_functions[tuple(blocks.latent.tolist())] is (
        dens.block_functions[tuple(blocks.latent.tolist())])


def test_elementwise_hyperparameters_compile_nothing_and_take_the_whole_gradient():
    model = _hier()
    layout, blocks = _latent(model)
    dens = compile_model_density(model)
    assert not add_block_gradient(model, dens, blocks.latent, {})
    assert dens.block_functions == {}
    x = _grouped(model, blocks)
    whole = dens.evaluate(x.reshape(12, -1), gradient=True)
    part = dens.evaluate_grouped(x, blocks.latent)
    got = part.grad_delta.reshape(12, -1)
    np.testing.assert_array_equal(got, whole.grad_delta[:, blocks.latent])
    np.testing.assert_array_equal(part.delta.ravel(), whole.delta)


def test_a_block_that_is_not_whole_variables_is_left_to_the_whole_gradient():
    model = _gp()
    dens = compile_model_density(model)
    layout, blocks = _latent(model)
    assert not add_block_gradient(model, dens, blocks.latent[:-1], {})  # part of f
    assert not add_block_gradient(model, dens, blocks.latent[::-1], {})  # out of order
    assert dens.block_functions == {}


def test_matrix_nodes_count_linear_algebra_and_matrix_products_only():
    a = pt.matrix("a")
    v = pt.vector("v")
    assert matrix_nodes([a], [pt.exp(a).sum()]) == 0
    assert matrix_nodes([a, v], [a @ v]) == 0  # a matrix times a vector
    assert matrix_nodes([a], [a @ a]) == 1
    assert matrix_nodes([a], [pt.linalg.cholesky(a @ a.T).sum()]) == 2


def test_the_default_grouped_evaluation_selects_and_sanitizes_columns():
    def lt(x):
        return np.where(x[:, 0] > 2.0, np.nan, -0.5 * np.sum(x * x, axis=1))

    def lq(x):
        return -0.5 * np.sum(x * x, axis=1)

    dens = FunctionDensity(3, log_q0=lq, log_target=lt, grad_log_q0=lambda x: -x,
                           grad_log_target=lambda x: -3.0 * x)  # fmt: skip
    x = np.array([[[0.5, 1.0, -1.0], [3.0, 1.0, 2.0]]])
    ev = dens.evaluate_grouped(x, np.array([2, 0]))
    assert dens.n_evals == 2 and ev.delta.shape == (1, 2)
    np.testing.assert_array_equal(ev.grad_log_q0[0, 0], [1.0, -0.5])
    np.testing.assert_array_equal(ev.grad_delta[0, 0], [2.0, -1.0])
    assert ev.delta[0, 1] == -np.inf and np.all(ev.grad_delta[0, 1] == 0.0)  # NaN: no weight
    with pytest.raises(ValueError, match="shape"):
        dens.evaluate_grouped(x[0], np.array([0]))


def test_one_copy_where_the_newton_runs_have_their_gradient_or_the_first_pilot_was_heavy():
    t = cs._Target(draws=2000, chains=4, target_mcse=0.02, one_copy=True)
    assert t.copies(-0.5, (0.32, 0.0)) == 1 and t.copies(0.6, (0.01, 0.0)) == 1
    plain = cs._Target(draws=2000, chains=4, target_mcse=0.02)
    assert plain.copies(-0.5, (0.32, 0.0)) == 10
    # kept on a refit after a first pilot above KHAT where the Laplace fit failed: one copy
    # (the AR(1)); beside a fit the copies still serve the prediction that keeps the start
    no_fit = cs._Target(draws=2000, chains=4, target_mcse=0.02, no_fit=True)
    assert no_fit.copies(-0.5, (0.32, 0.0), first_k=cs.KHAT + 0.1) == 1
    assert no_fit.copies(-0.5, (0.32, 0.0), first_k=cs.KHAT) == 10
    assert plain.copies(-0.5, (0.32, 0.0), first_k=cs.KHAT + 0.1) == 10


@pytest.mark.slow
def test_a_latent_gp_run_takes_the_block_gradient_and_is_right():
    """The applied tier's latent GP, defaults: the start with one copy a θ draw, and log Z
    within 3 MCSE of the exact value (the case's reference)."""
    from pymc_crais.validation import get_case

    inst = get_case("applied_gp_latent").build()
    idata = pmc.sample_smc(model=inst.model, random_seed=7, progressbar=False)
    attrs = idata["sample_stats"].attrs
    assert attrs["init_choice"] == "conditional_laplace"
    assert attrs["init_conditional_block_gradient"] and attrs["init_conditional_copies"] == 1
    log_z, mcse = pmc.log_marginal_likelihood(idata)
    assert mcse <= 0.05 and abs(log_z - inst.log_z) <= 3 * mcse


def test_unique_rows_and_the_mapper_map_each_distinct_row_once():
    x = np.array([[1.0, 2.0], [3.0, 4.0], [1.0, 2.0], [0.0, 1.0], [-0.0, 1.0]])
    rows, inverse = _unique_rows(x)
    assert rows.shape == (4, 2)  # -0.0 and 0.0 differ in their bits: both kept
    np.testing.assert_array_equal(rows[inverse], x)
    np.testing.assert_array_equal(rows, x[[0, 1, 3, 4]])  # in order of first appearance
    assert _unique_rows(x[:2])[1] is None
    model = _gp()
    mapper = posterior_mapper(model, parameter_layout(model))
    draws = _points(model, 4)
    repeated = draws[[0, 1, 0, 2, 3, 3]]
    out = mapper(repeated)
    for name, val in mapper(draws).items():
        np.testing.assert_array_equal(out[name], val[[0, 1, 0, 2, 3, 3]])
        out[name][0] += 1.0  # each row its own memory
        assert not np.array_equal(out[name][0], out[name][2])


def _split_latent():
    """Two latent vectors with a hyperparameter between them in the coordinates (``a`` at
    0:3, ``log ell`` at 3, ``v`` at 4:9), the second reaching the data through a Cholesky
    factor of ``ell``'s kernel matrix; and a constant deterministic of 3 rows."""
    x = np.linspace(0.0, 2.0, 5)
    y = np.array([0.3, 0.1, -0.4, 0.2, 0.9])
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, 1.0, shape=3)
        ell = pm.Gamma("ell", 2.0, 1.0)
        v = pm.Normal("v", 0.0, 1.0, shape=5)
        k = pt.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / ell**2) + 1e-6 * np.eye(5)
        f = pt.linalg.cholesky(k) @ v
        pm.Deterministic("const", pt.as_tensor_variable(np.arange(6.0).reshape(3, 2)))
        pm.Normal("y", f + a.sum(), 0.5, observed=y)
    return model


def test_latent_columns_on_both_sides_of_a_hyperparameter_keep_their_order():
    model = _split_latent()
    layout = parameter_layout(model)
    latent = np.array([0, 1, 2, 4, 5, 6, 7, 8])
    dens = compile_model_density(model)
    assert add_block_gradient(model, dens, latent, {})
    x = _points(model, 6).reshape(2, 3, -1)
    x[:, :, 3] = x[:, :1, 3]
    whole = dens.evaluate(x.reshape(6, -1), gradient=True)
    part = dens.evaluate_grouped(x, latent)
    np.testing.assert_allclose(part.delta.ravel(), whole.delta, rtol=1e-9)
    np.testing.assert_allclose(part.grad_delta.reshape(6, -1), whole.grad_delta[:, latent],
                               rtol=1e-7, atol=1e-9)  # fmt: skip
    assert layout.dim == 9
    empty = dens.evaluate_grouped(np.zeros((0, 3, 9)), latent)
    assert empty.grad_delta.shape == (0, 3, 8)
    with pytest.raises(ValueError, match="block"):
        dens.evaluate_grouped(x, latent[None])


def test_jax_takes_the_whole_gradient():
    model = _gp()
    layout, blocks = _latent(model)
    dens = compile_model_density(model)
    assert not add_block_gradient(model, dens, blocks.latent, {"mode": "JAX"})
    assert dens.block_functions == {}


def test_a_constant_deterministic_is_broadcast_whatever_the_distinct_rows():
    """Three distinct rows and a constant deterministic of three rows: broadcast, not taken
    for a batched output."""
    model = _split_latent()
    mapper = posterior_mapper(model, parameter_layout(model))
    draws = _points(model, 3)
    out = mapper(draws[[0, 1, 2, 0, 1]])
    assert out["const"].shape == (5, 3, 2)
    np.testing.assert_array_equal(out["const"][4], np.arange(6.0).reshape(3, 2))


@pytest.mark.slow
def test_same_bits_whatever_the_cores_with_the_grouped_function():
    """Chains in worker processes unpickle the grouped function: the same bits as in one."""
    model = _gp()
    out = []
    for cores in (1, 2):
        idata = pmc.sample_smc(model=model, random_seed=3, chains=2, draws=200, cores=cores,
                               progressbar=False)  # fmt: skip
        assert idata["sample_stats"].attrs["init_conditional_block_gradient"]
        out.append((idata["sample_stats"]["log_marginal_likelihood"].values,
                    idata["posterior"]["f"].values))  # fmt: skip
    for a, b in zip(*out, strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_mapper_fallback_keeps_a_constant_deterministic_one_row_a_particle(monkeypatch):
    """Where the map cannot be vectorized, the per-particle loop stacks every output, a
    constant deterministic too: it must not be broadcast a second time."""
    from pymc_crais.samplers.engine import mapping
    from pymc_crais.samplers.engine.compile import PerParticleFallbackWarning

    compile_function = mapping.compile_function

    def fail_batched(inputs, *args, **kwargs):  # the batched graph built, its compile fails
        if inputs[0].name == "theta_batch":
            raise NotImplementedError("no batched compile here")
        return compile_function(inputs, *args, **kwargs)

    model = _split_latent()
    layout = parameter_layout(model)
    draws = _points(model, 4)
    want = posterior_mapper(model, layout)(draws)
    monkeypatch.setattr(mapping, "compile_function", fail_batched)
    with pytest.warns(PerParticleFallbackWarning, match="one at a time"):
        mapper = mapping.PosteriorMapper(model, layout)
    assert not mapper.vectorized
    got = mapper(draws)
    assert got["const"].shape == (4, 3, 2)
    for name, val in want.items():
        np.testing.assert_allclose(got[name], val, rtol=1e-12, atol=1e-12)
