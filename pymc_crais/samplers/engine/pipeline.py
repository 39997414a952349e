"""The one set-up and finish path every sampler takes.

``prepare(options)`` checks the shared arguments, compiles the model once (batched
``(log prior, ℓ)`` and gradients), builds the prior sampler and the initial distribution
``q0`` (``init=``), the kernel and the per-chain generators. ``finish`` maps the chains'
unconstrained draws to named variables and hands everything to the results layer (or
returns a :class:`~pymc_crais.chain_result.SamplerResult`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import numpy as np

from ...chain_result import ChainResult, SamplerResult, per_chain_arrays
from ...core.kernels import MutationKernel, make_kernel
from .compile import compile_model_density, parameter_layout, resolve_compile_kwargs, uses_jax
from .init_option import build_initial
from .kernel_choice import resolve_kernel
from .mapping import posterior_mapper
from .memory import block_rows, check_memory_budget, jax_on_accelerator
from .model_info import check_model_for_evidence, model_data_for_results
from .noncentre import check_reparameterize, reparameterized
from .options import RunOptions, check_int
from .prior import prior_sampler
from .reproducible import with_pytensor_lock
from .runner import chain_generators
from .staged import long_run_ahead

__all__ = ["RunSetup", "check_executor", "finish", "fresh_kernel", "kernel_attributes", "prepare"]


@dataclass
class RunSetup:
    """Everything a sampler needs after the set-up.

    Attributes
    ----------
    options : RunOptions
        The arguments as given.
    model, layout
        The PyMC model and its raveling of the free variables.
    density : BatchedDensity
        ``(log q0, Δ)`` with the chosen ``q0`` (counts its evaluations in ``n_evals``).
    draw : callable
        ``(rng, n) -> (n, d)`` exact draws from ``q0``.
    kernel : MutationKernel
        The kernel the chains share.
    chain_rngs, aux_rng : Generator
        One generator per chain, and one for run-level work (pilots, tuning runs).
    chains, cores, draws : int
        Checked values.
    compile_kwargs : dict
        The resolved compile options.
    attrs : dict
        Settings for the output (draws, kernel, ``init``...).
    n_evals_setup : int
        Model evaluations spent building ``q0`` (the Laplace fit).
    executor : concurrent.futures.Executor or None
        Where the chains run (``None``: this process or a pool of ``cores`` processes).
    batched : bool
        All chains in this process with one batched model call (the JAX backend).
    """

    options: RunOptions
    model: object
    layout: object
    density: object
    draw: object
    kernel: MutationKernel
    chain_rngs: list
    aux_rng: np.random.Generator
    chains: int
    cores: int
    draws: int
    compile_kwargs: dict
    attrs: dict
    n_evals_setup: int = 0
    executor: object = None
    batched: bool = False

    @property
    def model_density(self):
        """The model's ``(log prior, ℓ)`` density, whatever start ``density`` anneals from
        (the base of an :class:`~pymc_crais.core.initial.InitialReweightedDensity`)."""
        return getattr(self.density, "base", None) or self.density


def kernel_attributes(mutation) -> dict:
    """A kernel's description as run attributes: ``kernel`` (its name) and
    ``kernel_<setting>`` for each of its settings."""
    return {f"kernel_{k}" if k != "kernel" else k: v for k, v in mutation.describe().items()}


@with_pytensor_lock  # graphs and compilations: one thread of the process at a time
def prepare(options: RunOptions) -> RunSetup:
    """Check the shared arguments, compile the model and build ``q0``, kernel and seeds.

    Errors that need no compilation (bad numbers, seeds, kernel/model mismatches) are raised
    before compiling.
    """
    import pymc as pm

    o = options
    model, noncentred = reparameterized(
        pm.modelcontext(o.model), check_reparameterize(o.reparameterize)
    )
    draws = check_int(o.draws, "draws", 2, "use at least 2 particles (hundreds are typical)")
    cores = o.cores
    if cores is None:
        cores = os.cpu_count() or 1
    cores = check_int(cores, "cores", 1, "use cores=1 for sequential chains")
    chains = o.chains
    if chains is None:
        chains = max(2, cores)
    chains = check_int(chains, "chains", 1, "use chains=1 for a single run")
    cores = min(cores, chains)
    check_int(o.n_mcmc_steps, "n_mcmc_steps", 0, "e.g. n_mcmc_steps=1")
    layout = parameter_layout(model)
    kernel, kernel_attrs = resolve_kernel(
        o.kernel, o.kernel_kwargs, layout, o.per_level_kernel, o.resamples
    )
    o = replace(o, kernel=kernel)  # "auto" resolved: fresh_kernel builds the same kernel
    mutation = make_kernel(kernel, **dict(o.kernel_kwargs or {}))
    if o.idata_kwargs is not None:
        unknown = set(o.idata_kwargs) - {"coords", "dims", "log_likelihood"}
        if unknown:
            raise TypeError(
                f"idata_kwargs keys {sorted(unknown)} are not supported; use 'coords', 'dims' "
                "or 'log_likelihood'"
            )
    if layout.dim == 0:
        raise ValueError(
            "the model has no free random variables, so there is nothing to anneal; its "
            "evidence is its likelihood at the fixed values"
        )
    if mutation.needs_gradient and layout.has_discrete:
        raise ValueError(
            f"kernel={mutation.name!r} needs gradients but the model has discrete free "
            f"variables {layout.discrete_names}; use kernel='rwmh' or kernel='imh'"
        )
    init = o.init
    check_model_for_evidence(model, init)
    chain_rngs, aux_rng = chain_generators(o.random_seed, chains)  # seed errors first
    ckw = resolve_compile_kwargs(o.backend, o.compile_kwargs)
    executor = check_executor(o.executor)
    budget = check_memory_budget(o.memory_budget)
    # JAX: every chain in this process, their particles in one batched call (a forked JAX
    # runtime deadlocks, and one process should drive an accelerator with big batches)
    on_jax = uses_jax(ckw)
    batched = on_jax and chains > 1 and executor is None
    fits = isinstance(init, str) and init in ("laplace", "auto") and not layout.has_discrete
    model_density = compile_model_density(
        model, gradient=mutation.needs_gradient or fits, compile_kwargs=ckw
    )
    model_density.block_rows = block_rows(model, layout.dim, budget, jax=on_jax)
    model_density.pad_rows = on_jax and jax_on_accelerator()  # few shapes to compile
    draws_prior = isinstance(init, str) and init in ("prior", "auto")  # proper: checked above
    prior = prior_sampler(model, layout, ckw) if draws_prior else None
    # the automatic start draws from its own child of the run-level generator, so the
    # pilots and tuning runs that follow see the same stream whatever it spent
    init_rng = aux_rng.spawn(1)[0] if isinstance(init, str) and init == "auto" else None
    initial = build_initial(
        init, o.init_kwargs, model, model_density, prior, init_rng, mode_mixture=o.mode_mixture
    )
    attrs = {
        "draws": draws,
        "n_mcmc_steps": int(o.n_mcmc_steps),
        "vectorized": model_density.vectorized,
        **initial.attrs,
        **kernel_attributes(mutation),
        **kernel_attrs,
        **({"noncentred": ",".join(noncentred)} if noncentred else {}),
    }
    if long_run_ahead(model_density.numpy_cost, draws, attrs):
        model_density.spend_setup_budget(mutation.needs_gradient)  # the chains: on Numba
    return RunSetup(
        options=o,
        model=model,
        layout=layout,
        density=initial.density,
        draw=initial.draw,
        kernel=mutation,
        chain_rngs=chain_rngs,
        aux_rng=aux_rng,
        chains=chains,
        cores=cores,
        draws=draws,
        compile_kwargs=ckw,
        attrs=attrs,
        n_evals_setup=initial.n_evals,
        executor=executor,
        batched=batched,
    )


def check_executor(executor):
    """``executor`` if it is ``None`` or has ``submit`` (a ``concurrent.futures.Executor``,
    a Dask client's ``get_executor()``), else a ``TypeError`` saying what to pass."""
    if executor is None or callable(getattr(executor, "submit", None)):
        return executor
    raise TypeError(
        f"executor must be a concurrent.futures.Executor (e.g. ProcessPoolExecutor(), or "
        f"client.get_executor() of a dask.distributed Client), got {executor!r}"
    )


def fresh_kernel(setup: RunSetup) -> MutationKernel:
    """A new kernel of the run's kind (a user's kernel object is returned as it is)."""
    kernel = setup.options.kernel
    if isinstance(kernel, str):
        return make_kernel(kernel, **dict(setup.options.kernel_kwargs or {}))
    return setup.kernel


@with_pytensor_lock  # the mapping's graphs and compilation, PyMC's log-likelihood
def finish(setup: RunSetup, chains: list[ChainResult], attrs: dict, extra_vars: dict):
    """The sampler's return value from its chains' results.

    Maps each chain's draws to named variables (deterministics included) and builds the
    ``xarray.DataTree`` (or a ``SamplerResult`` when ``return_inferencedata=False``).
    ``extra_vars`` are run-level ``name -> (dims, array)`` added to ``sample_stats``.
    """
    from ...diagnostics import check_chains

    chains = check_chains(chains, attrs)  # diagnostics stored; warns if log Z is unreliable
    mapper = posterior_mapper(setup.model, setup.layout, setup.compile_kwargs)
    per_chain = [mapper(c.x) for c in chains]
    posterior = {k: np.stack([pc[k] for pc in per_chain]) for k in mapper.names}
    if not setup.options.return_inferencedata:
        return SamplerResult(
            posterior,
            [c.as_dict() for c in chains],
            attrs,
            {**per_chain_arrays(chains), **extra_vars},
        )
    import pymc as pm

    from ...results import build_datatree

    info = model_data_for_results(setup.model)
    ik = dict(setup.options.idata_kwargs or {})
    idata = build_datatree(
        posterior=posterior,
        chains=chains,
        attrs=attrs,
        coords={**info["coords"], **dict(ik.get("coords") or {})},
        dims={**info["dims"], **dict(ik.get("dims") or {})},
        observed_data=info["observed_data"],
        constant_data=info["constant_data"],
        extra_vars=extra_vars,
    )
    if ik.get("log_likelihood"):
        idata = pm.compute_log_likelihood(
            idata, model=setup.model, extend_inferencedata=True, progressbar=False
        )
    return idata
