"""``sample_mcd``: differentiable annealing (MCD, ULA, UHA) on PyMC models.

The NumPy core (:mod:`pymc_crais.core.learned.ula`, :mod:`pymc_crais.core.learned.mcd`) learns the step
sizes, the initial Gaussian and the schedule (and, for MCD, the backward network) by
maximizing the ELBO, then estimates ``log Z`` from fresh trajectories. This module only
adapts a PyMC model to it: the batched log-density and gradient of the shared set-up, an
exact batched Hessian-vector product compiled by PyTensor (needed to differentiate
through the chain), and standardized coordinates from a Laplace fit.

The set-up and result helpers of the sampler layer are used in one place each
(:func:`pymc_crais.samplers.engine.pipeline.prepare` and ``finish``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..core.initial import laplace_fit
from ..core.learned.mcd import METHODS
from ..warnings import renamed_argument
from .engine.compile import initial_point_vector, joined_scalar_graph, uses_jax
from .engine.jax_data import DataCompiler
from .engine.mcd_chain import MCDTask, run_mcd_chain
from .engine.options import RunOptions, check_int
from .engine.pipeline import finish, prepare
from .engine.progress import ChainProgress
from .engine.runner import run_chains, single_threaded_blas

__all__ = ["MCDSettings", "run_mcd", "sample_mcd"]


def compile_hvp(model, layout, compile_kwargs: dict | None = None):
    """Batched exact Hessian-vector products of ``log prior + log likelihood``.

    Returns a function ``(x, v) -> H(x_i) v_i`` for ``(N, d)`` arrays, or ``None`` if the
    graph cannot be built (the caller then uses central differences of the gradient).
    """
    import pytensor.tensor as pt
    from pytensor.graph.replace import vectorize_graph

    try:
        (lp,), theta = joined_scalar_graph(model, [model.varlogp + model.datalogp], layout)
        xb = pt.matrix("theta_batch", dtype="float64")
        vb = pt.matrix("v_batch", dtype="float64")
        blp = vectorize_graph(pt.as_tensor_variable(lp).astype("float64"), replace={theta: xb})
        g = pt.grad(blp.sum(), xb)
        hv = pt.grad(pt.sum(g * vb), xb)
        ckw = dict(compile_kwargs or {})
        fn = DataCompiler(ckw, uses_jax(ckw)).compile([xb, vb], [hv])  # JAX: data as inputs
        x0 = np.zeros((2, layout.dim))
        fn(x0, x0)
    except Exception:  # noqa: BLE001 (an Op without a second derivative, an unbatchable graph)
        return None

    def hvp(x, v):
        return fn(np.ascontiguousarray(x), np.ascontiguousarray(v))[0]

    return hvp


@single_threaded_blas
def sample_mcd(
    draws: int = 2000,
    n_steps: int = 64,
    train_steps: int = 400,
    *,
    method: str = "mcd",
    chains: int | None = None,
    cores: int | None = None,
    random_seed=None,
    model=None,
    batch: int = 64,
    learn: tuple[str, ...] | None = None,
    lr: float = 0.05,
    net_lr: float = 0.005,
    step_size: float = 0.05,
    max_step_size: float = 0.25,
    hidden: int = 32,
    n_blocks: int = 2,
    hvp: str = "auto",
    progressbar: bool = True,
    return_inferencedata: bool = True,
    idata_kwargs: dict | None = None,
    backend: str | None = None,
    compile_kwargs: dict | None = None,
    memory_budget: float | None = None,
    mp_ctx=None,
    **renamed,
):
    """Learned unadjusted annealing: Monte Carlo Diffusion (default), ULA or UHA AIS.

    In coordinates standardized by a Laplace fit (mode and marginal standard deviations),
    particles go from a Gaussian ``q0`` to the posterior by ``n_steps`` unadjusted Langevin
    (MCD, ULA) or one-leapfrog Hamiltonian (UHA) moves along the geometric path, with exact
    importance weights. Per chain: ``train_steps`` Adam iterations on batches of ``batch``
    trajectories maximize the ELBO ``E[log w]`` over the per-step step sizes, ``q0``'s mean
    and scale, the schedule, and for MCD the small network of the learned backward kernel
    (ALGORITHMS.md §9, docs/algorithms.md); then ``draws`` fresh trajectories give
    ``log Z`` (their mean weight) and the posterior draws (resampled final states).

    Parameters
    ----------
    draws : int, default 2000
        Trajectories of the final estimate per chain (and posterior draws per chain).
    n_steps : int, default 64
        Annealing steps ``K``.
    train_steps : int, default 400
        Adam iterations per chain (0: no learning, the initial parameters as they are).
    method : {"mcd", "ula", "uha"}, default "mcd"
    chains : int, optional
        Independent chains, each trained on its own (default 2).
    cores : int, optional
        Worker processes running the chains (default: the number of CPUs; with the JAX
        backend the chains run in this process). Results do not depend on it: same seed,
        same bits.
    random_seed : int, sequence, Generator or None
        As the other samplers: one generator per chain.
    model : pymc.Model, optional
        From the context if not given.
    batch : int, default 64
        Trajectories per training iteration.
    learn : tuple of str, optional
        Sampler parameters learned (default all: ``("step_logit", "schedule_logit", "mu",
        "log_sigma")``, plus ``"eta_logit"`` for UHA); ``()`` learns only MCD's network.
    lr, net_lr : float, default 0.05 and 0.005
        Adam rates of the sampler parameters and of the network (decaying to 10 %).
    step_size, max_step_size : float, default 0.05 and 0.25
        Initial step size and the upper bound of the learned ones (standardized units).
        ``max_step_size`` was ``max_step`` until 2026-11-27 (that name still works, with a
        :class:`~pymc_crais.warnings.RenamedWarning`): the annealing samplers' ``max_step``
        bounds the step in τ.
    hidden, n_blocks : int, default 32 and 2
        Width and residual blocks of MCD's network.
    hvp : {"auto", "pytensor", "fd"}, default "auto"
        Hessian-vector products for the gradients through the chain: compiled by PyTensor
        (``"auto"`` falls back to ``"fd"``, central differences of the batched gradient,
        when the model's graph has no second derivative).
    progressbar : bool, default True
        Show the training progress of each chain.
    return_inferencedata, idata_kwargs, backend, compile_kwargs, memory_budget, mp_ctx
        As :func:`pymc_crais.sample_ais`.
    **renamed
        Old names of arguments (``max_step``); any other keyword is a ``TypeError``.

    Returns
    -------
    xarray.DataTree or SamplerResult
        As :func:`pymc_crais.sample_ais`, with ``method`` = ``"mcd"``, ``"ula"`` or
        ``"uha"``; ``sample_stats`` holds per chain ``log_marginal_likelihood`` and its
        ``log_marginal_likelihood_mcse`` (delta method on the final weights),
        ``n_logp_evals`` (gradient evaluations of Laplace fit, training and estimate; a
        Hessian-vector product counts as two), the learned ``step_size`` and ``tau``
        (schedule) per stage, and the training curve ``training_elbo`` /
        ``training_log_z`` per iteration, and the learned ``q0_mean`` / ``q0_sd`` (model's
        unconstrained coordinates).

    Notes
    -----
    Most of the cost is training. On small PyMC models (validation cases with d ≤ 10) its
    defaults spent about 10 million model evaluations per run, 85 to 300 times
    :func:`pymc_crais.sample_smc`'s defaults for an error of the same size, and at equal
    evaluations ``sample_smc`` had a 4 to 11 times smaller MCSE (benchmarks/reports/benchmarks.md, "When
    does it pay on PyMC models?"). Learned backward kernels pay on long, high-dimensional
    unadjusted chains, not on such posteriors.

    Raises
    ------
    ValueError
        For an unknown ``method`` or ``hvp``, or a model with discrete variables (the moves
        need gradients).
    """
    settings = MCDSettings(
        draws=draws,
        n_steps=n_steps,
        train_steps=train_steps,
        method=method,
        chains=chains,
        cores=cores,
        random_seed=random_seed,
        model=model,
        batch=batch,
        learn=learn,
        lr=lr,
        net_lr=net_lr,
        step_size=step_size,
        max_step_size=renamed_argument(
            "sample_mcd", "max_step", "max_step_size", max_step_size, renamed,
            why="the annealing samplers' max_step bounds the step in tau",
        ),
        hidden=hidden,
        n_blocks=n_blocks,
        hvp=hvp,
        progressbar=progressbar,
        return_inferencedata=return_inferencedata,
        idata_kwargs=idata_kwargs,
        backend=backend,
        compile_kwargs=compile_kwargs,
        memory_budget=memory_budget,
        mp_ctx=mp_ctx,
    )
    return run_mcd(settings)


@dataclass(frozen=True)
class MCDSettings:
    """Every argument of :func:`sample_mcd`, as given or defaulted there (its signature is
    the one place the defaults are written): built once per call and passed whole to
    :func:`run_mcd`."""

    draws: int
    n_steps: int
    train_steps: int
    method: str
    chains: int | None
    cores: int | None
    random_seed: object
    model: object
    batch: int
    learn: tuple[str, ...] | None
    lr: float
    net_lr: float
    step_size: float
    max_step_size: float
    hidden: int
    n_blocks: int
    hvp: str
    progressbar: bool
    return_inferencedata: bool
    idata_kwargs: dict | None
    backend: str | None
    compile_kwargs: dict | None
    memory_budget: float | None
    mp_ctx: object


def run_mcd(st: MCDSettings):
    """:func:`sample_mcd`'s checks, set-up, Laplace standardization and chains."""
    t_start = time.perf_counter()
    method, hvp, learn, lr, net_lr = st.method, st.hvp, st.learn, st.lr, st.net_lr
    step_size, max_step_size = st.step_size, st.max_step_size
    hidden, n_blocks = st.hidden, st.n_blocks
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if hvp not in ("auto", "pytensor", "fd"):
        raise ValueError(f"hvp must be 'auto', 'pytensor' or 'fd', got {hvp!r}")
    n_steps = check_int(st.n_steps, "n_steps", 1, "e.g. n_steps=64")
    train_steps = check_int(st.train_steps, "train_steps", 0, "e.g. train_steps=400")
    batch = check_int(st.batch, "batch", 2, "e.g. batch=64")
    if learn is None:
        learn = ("step_logit", "schedule_logit", "mu", "log_sigma") + (
            ("eta_logit",) if method == "uha" else ()
        )
    chains = 2 if st.chains is None else st.chains
    setup = prepare(RunOptions.from_settings(st, kernel="mala", chains=chains))
    density, layout = setup.density, setup.layout
    fit = laplace_fit(density, initial_point_vector(setup.model, layout))
    shift, scale = fit.mode, np.sqrt(np.clip(np.diag(fit.cov), 1e-300, None))
    hvp_fn = None if hvp == "fd" else compile_hvp(setup.model, layout, setup.compile_kwargs)
    if hvp == "pytensor" and hvp_fn is None:
        raise ValueError(
            "hvp='pytensor': the model's Hessian-vector product could not be compiled; use hvp='fd'"
        )
    attrs = {
        "method": method,
        "path": "geometric",
        "draws": setup.draws,
        "n_steps": n_steps,
        "train_steps": train_steps,
        "batch": batch,
        "learn": ",".join(learn) or "network",
        "lr": float(lr),
        "net_lr": float(net_lr),
        "max_step_size": float(max_step_size),
        "hidden": int(hidden) if method == "mcd" else 0,
        "n_blocks": int(n_blocks) if method == "mcd" else 0,
        "hvp": "pytensor" if hvp_fn is not None else "fd",
        "init": "laplace_diagonal",
        "laplace_converged": fit.converged,
        "laplace_log_evidence": fit.log_evidence(),
        "n_logp_evals_laplace": fit.n_evals,
        "vectorized": setup.attrs.get("vectorized", True),
    }
    tasks = [
        MCDTask(
            chain=c,
            rng=setup.chain_rngs[c],
            density=density,
            hvp=hvp_fn,
            shift=shift,
            scale=scale,
            draws=setup.draws,
            method=method,
            n_steps=n_steps,
            train_steps=train_steps,
            batch=batch,
            learn=tuple(learn),
            lr=lr,
            net_lr=net_lr,
            step_size=step_size,
            max_step_size=max_step_size,
            hidden=hidden,
            n_blocks=n_blocks,
            extra_evals=fit.n_evals if c == 0 else 0,
        )
        for c in range(setup.chains)
    ]
    t0 = time.perf_counter()
    progress = ChainProgress(st.progressbar, setup.chains, method.upper())
    # JAX: the chains in this process (a forked JAX runtime deadlocks), one after the other
    cores = 1 if uses_jax(setup.compile_kwargs) else setup.cores
    outs = run_chains(tasks, run_mcd_chain, cores, st.mp_ctx, progress)
    attrs["sampling_time"] = time.perf_counter() - t0
    attrs["wall_time"] = time.perf_counter() - t_start
    return finish(setup, outs, attrs, {})

