"""``sample_mcd``: differentiable annealing (MCD, ULA, UHA) on PyMC models.

The NumPy core (:mod:`pymc_crais.core.ula`, :mod:`pymc_crais.core.mcd`) learns the step
sizes, the initial Gaussian and the schedule (and, for MCD, the backward network) by
maximizing the ELBO, then estimates ``log Z`` from fresh trajectories. This module only
adapts a PyMC model to it: the batched log-density and gradient of the shared set-up, an
exact batched Hessian-vector product compiled by PyTensor (needed to differentiate
through the chain), and standardized coordinates from a Laplace fit.

The set-up and result helpers of the sampler layer are used in one place each
(:func:`pymc_crais.samplers.pipeline.prepare` and ``finish``).
"""

from __future__ import annotations

import time

import numpy as np

from ..chain_result import STAGE_KEYS, ChainResult
from ..core.initial import laplace_fit
from ..core.mcd import METHODS, ResidualScore, estimate, train
from ..core.resampling import systematic
from ..core.ula import (
    DensityTarget,
    betas_from_params,
    init_params,
    log_z_estimate,
    step_sizes_from_params,
)
from ..core.weights import normalized_weights
from .compile import initial_point_vector, joined_scalar_graph, uses_jax
from .jax_data import DataCompiler
from .options import RunOptions, check_int
from .pipeline import finish, prepare
from .progress import ChainProgress

__all__ = ["sample_mcd"]


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


def sample_mcd(
    draws: int = 2000,
    n_steps: int = 64,
    train_steps: int = 400,
    *,
    method: str = "mcd",
    chains: int | None = None,
    random_seed=None,
    model=None,
    batch: int = 64,
    learn: tuple[str, ...] | None = None,
    lr: float = 0.05,
    net_lr: float = 0.005,
    step_size: float = 0.05,
    max_step: float = 0.25,
    hidden: int = 32,
    n_blocks: int = 2,
    hvp: str = "auto",
    progressbar: bool = True,
    return_inferencedata: bool = True,
    idata_kwargs: dict | None = None,
    backend: str | None = None,
    compile_kwargs: dict | None = None,
    memory_budget: float | None = None,
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
        Independent chains, each trained on its own (default 2). They run in this process,
        one after the other.
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
    step_size, max_step : float, default 0.05 and 0.25
        Initial step size and the upper bound of the learned ones (standardized units).
    hidden, n_blocks : int, default 32 and 2
        Width and residual blocks of MCD's network.
    hvp : {"auto", "pytensor", "fd"}, default "auto"
        Hessian-vector products for the gradients through the chain: compiled by PyTensor
        (``"auto"`` falls back to ``"fd"``, central differences of the batched gradient,
        when the model's graph has no second derivative).
    progressbar : bool, default True
        Show the training progress of each chain.
    return_inferencedata, idata_kwargs, backend, compile_kwargs, memory_budget
        As :func:`pymc_crais.sample_ais`.

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
    kwargs = dict(locals())
    from threadpoolctl import threadpool_limits

    # one BLAS thread: the batched products are small (as the other samplers, sampling.py)
    with threadpool_limits(limits=1):
        return _sample_mcd(**kwargs)


def _sample_mcd(
    *,
    draws,
    n_steps,
    train_steps,
    method,
    chains,
    random_seed,
    model,
    batch,
    learn,
    lr,
    net_lr,
    step_size,
    max_step,
    hidden,
    n_blocks,
    hvp,
    progressbar,
    return_inferencedata,
    idata_kwargs,
    backend,
    compile_kwargs,
    memory_budget,
):
    t_start = time.perf_counter()
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if hvp not in ("auto", "pytensor", "fd"):
        raise ValueError(f"hvp must be 'auto', 'pytensor' or 'fd', got {hvp!r}")
    n_steps = check_int(n_steps, "n_steps", 1, "e.g. n_steps=64")
    train_steps = check_int(train_steps, "train_steps", 0, "e.g. train_steps=400")
    batch = check_int(batch, "batch", 2, "e.g. batch=64")
    if learn is None:
        learn = ("step_logit", "schedule_logit", "mu", "log_sigma") + (
            ("eta_logit",) if method == "uha" else ()
        )
    setup = prepare(
        RunOptions(
            model=model,
            draws=draws,
            chains=2 if chains is None else chains,
            cores=1,
            kernel="mala",
            random_seed=random_seed,
            backend=backend,
            compile_kwargs=compile_kwargs,
            memory_budget=memory_budget,
            idata_kwargs=idata_kwargs,
            progressbar=progressbar,
            return_inferencedata=return_inferencedata,
        )
    )
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
        "max_step": float(max_step),
        "hidden": int(hidden) if method == "mcd" else 0,
        "n_blocks": int(n_blocks) if method == "mcd" else 0,
        "hvp": "pytensor" if hvp_fn is not None else "fd",
        "init": "laplace_diagonal",
        "laplace_converged": fit.converged,
        "laplace_log_evidence": fit.log_evidence(),
        "n_logp_evals_laplace": fit.n_evals,
        "vectorized": setup.attrs.get("vectorized", True),
    }
    outs, elbos, logzs, eps_all, q0_all = [], [], [], [], []
    t0 = time.perf_counter()
    with ChainProgress(progressbar, setup.chains, f"{method.upper()} training") as prog:
        for c in range(setup.chains):
            rng = setup.chain_rngs[c]
            target = DensityTarget(
                layout.dim, density=density, hvp_fn=hvp_fn, shift=shift, scale=scale
            )
            before = density.n_evals
            params = init_params(layout.dim, n_steps, step_size=step_size, max_step=max_step)
            score = (
                ResidualScore(layout.dim, n_steps, hidden=hidden, n_blocks=n_blocks)
                if method == "mcd"
                else None
            )

            def report(it, elbo, c=c):
                prog.update(c, it + 1, (it + 1) / max(train_steps, 1), float("nan"), float("nan"))

            res = train(
                target,
                params,
                rng,
                method=method,
                train_steps=train_steps,
                batch=batch,
                learn=tuple(learn),
                lr=lr,
                net_lr=net_lr,
                score=score,
                callback=report,
            )
            n_train = density.n_evals - before + 2 * (target.n_hvp if hvp_fn is not None else 0)
            before = density.n_evals
            lw, y = estimate(
                target, res, rng, setup.draws, method=method, score=score, return_x=True
            )
            n_est = density.n_evals - before
            log_z, mcse = log_z_estimate(lw)
            idx = rng.permutation(systematic(rng, normalized_weights(lw), setup.draws))
            beta = betas_from_params(res.params)
            eps = step_sizes_from_params(res.params)
            out = {
                "chain": c,
                "x": target.to_model(y[idx]),
                "log_marginal_likelihood": log_z,
                "log_z_variance": mcse**2,
                "n_logp_evals": int(n_train + n_est + (fit.n_evals if c == 0 else 0)),
                "n_logp_evals_training": int(n_train),
                "log_weights": lw,
                "hit_max_steps": False,
                "tau": beta[1:],
                "ess": np.full(n_steps, np.nan),
                "acceptance_rate": np.full(n_steps, np.nan),
                "log_z_increment": np.full(n_steps, np.nan),
                "mcmc_steps": np.ones(n_steps),
                "resampled": np.zeros(n_steps, dtype=bool),
                "elbo": float(np.mean(lw[np.isfinite(lw)])) if np.isfinite(lw).any() else -np.inf,
            }
            if method == "uha":
                out["eta"] = 0.98 / (1.0 + np.exp(-float(res.params["eta_logit"]))) + 0.01
            prog.chain_done(out)
            outs.append(_chain_result(out))
            elbos.append(res.elbo)
            logzs.append(res.log_z)
            eps_all.append(eps)
            q0_all.append(
                (shift + scale * res.params["mu"], scale * np.exp(res.params["log_sigma"]))
            )
    attrs["sampling_time"] = time.perf_counter() - t0
    attrs["wall_time"] = time.perf_counter() - t_start
    extra = {
        "step_size": (("chain", "stage"), np.stack(eps_all)),
        "training_elbo": (("chain", "train_iteration"), np.stack(elbos)),
        "training_log_z": (("chain", "train_iteration"), np.stack(logzs)),
        "q0_mean": (("chain", "unconstrained_dim"), np.stack([m for m, _ in q0_all])),
        "q0_sd": (("chain", "unconstrained_dim"), np.stack([sd for _, sd in q0_all])),
    }
    return finish(setup, outs, attrs, extra)


def _chain_result(out: dict) -> ChainResult:
    """A chain's output dict as the typed :class:`ChainResult` the results layer takes."""
    fixed = {
        "chain", "x", "log_marginal_likelihood", "log_z_variance", "n_logp_evals",
        "log_weights", "hit_max_steps", *STAGE_KEYS,
    }  # fmt: skip
    return ChainResult(
        chain=out["chain"],
        x=out["x"],
        log_marginal_likelihood=out["log_marginal_likelihood"],
        log_z_variance=out["log_z_variance"],
        n_logp_evals=out["n_logp_evals"],
        log_weights=out["log_weights"],
        hit_max_steps=out["hit_max_steps"],
        stages={k: out[k] for k in STAGE_KEYS},
        stats={k: v for k, v in out.items() if k not in fixed},
    )
