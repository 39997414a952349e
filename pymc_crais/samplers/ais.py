"""``sample_ais``: annealed importance sampling of a PyMC model.

Particles drawn from ``q0`` are annealed along the path over a fixed or adaptive (ESS,
CESS) schedule, moved by a batched kernel and weighted, never resampled; ``mean(w)``
estimates ``Z``. ``schedule="constant_rate"`` hands over to :func:`sample_crais`.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass

from ..core.anneal import AnnealOptions
from ..core.paths import make_path
from .crais import sample_crais
from .engine.anneal_chain import AnnealPlan
from .engine.options import RunArguments, RunOptions, check_int
from .engine.path_option import build_path, check_path
from .engine.pipeline import prepare
from .engine.runner import single_threaded_blas
from .engine.schedule_option import AIS_SCHEDULES, ScheduleArg, parse_schedule
from .engine.tuning import scale_shift_pilot, thermodynamic_pilot

__all__ = ["AISSettings", "plan_ais", "sample_ais"]


@single_threaded_blas
def sample_ais(
    draws: int = 1000,
    schedule="linear",
    n_steps: int = 200,
    alpha: float = 0.0,
    kernel="auto",
    chains: int | None = None,
    cores: int | None = None,
    random_seed=None,
    progressbar: bool = True,
    return_inferencedata: bool = True,
    idata_kwargs: dict | None = None,
    compile_kwargs: dict | None = None,
    *,
    model=None,
    init="auto",
    init_kwargs: dict | None = None,
    n_mcmc_steps: int = 1,
    kernel_kwargs: dict | None = None,
    schedule_kwargs: dict | None = None,
    rho: float | None = None,
    max_step: float | None = None,
    min_step: float | None = None,
    max_steps: int = 100_000,
    scale_shift: float | str | None = None,
    backend: str | None = None,
    mp_ctx=None,
    executor=None,
    memory_budget: float | None = None,
    path: str = "geometric",
    path_kwargs: dict | None = None,
    **crais_kwargs,
):
    """Estimate the evidence ``log Z`` of a PyMC model by annealed importance sampling.

    Particles are drawn from ``q0`` (the prior by default), annealed along the path ``γ_τ``
    (geometric for ``alpha=0``, power mean otherwise) over the ``schedule``, moved by a
    batched MCMC ``kernel`` at every step, and weighted (never resampled), so that
    ``mean(w)`` estimates ``Z``.

    Parameters
    ----------
    draws : int, default 1000
        Particles per chain (``>= 2``); also the number of posterior draws per chain.
    schedule : str, array_like or previous result, default "linear"
        ``"linear"``, ``"sigmoid"``, ``"exponential"`` (fixed, ``n_steps`` steps);
        ``"ess"`` or ``"cess"`` (adaptive AIS: each step keeps ``ESS(W·incr) = ρ ESS(W)`` or
        the conditional ESS at ``ρN``, per chain, by bisection); ``"constant_rate"`` (runs
        :func:`sample_crais` with the remaining arguments; those left at this function's
        defaults take :func:`sample_crais`'s, e.g. ``n_steps="auto"``); an increasing array of τ from
        exactly 0 to 1; or a previous result, whose schedule is re-used. ``"thermodynamic"``:
        ``n_steps`` steps of equal thermodynamic length along the path (seed 004's optimal
        binned schedule), the metric ``Var_τ[∂_τ log γ_τ]`` from a geometric pilot's
        stages pooled (``n_logp_evals_pilot``); see ``docs/paths.md``.
    n_steps : int, default 200
        Steps of a fixed named schedule.
    alpha : float, default 0.0
        Power-mean exponent of the path: 0 geometric, 1 arithmetic; any finite value.
    kernel : {"auto", "hmc", "mala", "rwmh", "mh", "imh", "imh_then_hmc", "hmc_final_imh"} or MutationKernel, default "auto"
        Mutation kernel. ``"auto"``: ``"hmc"`` on continuous models, ``"imh"`` on models with
        discrete variables (recorded in the attributes ``kernel``, ``kernel_requested`` and
        ``kernel_reason``). ``"hmc"`` and ``"mala"`` need gradients and continuous variables;
        ``"rwmh"`` (alias ``"mh"``: random-walk Metropolis with particle-covariance
        proposals) and ``"imh"`` (independence Metropolis with Gaussians fitted to the
        particles, each half of them to the other) work for all; ``"imh_then_hmc"``
        (independence moves, then HMC from the first transition that accepts under 2.5 %
        of its proposals) needs gradients once it falls back; ``"hmc_final_imh"`` (SMC's
        default on continuous models) is HMC, and at ``τ = 1`` independence moves while
        they are accepted (a replay of tuned parameters, as CR-AIS's final run, is HMC's).
    chains : int, optional
        Independent runs (default: ``max(2, cores)``, as PyMC).
    cores : int, optional
        Worker processes (default: the number of CPUs). Results do not depend on it.
    random_seed : int, sequence of int, SeedSequence or Generator, optional
        Seeds everything; the global NumPy RNG is never used.
    progressbar : bool, default True
        Print one line per finished chain to stderr.
    return_inferencedata : bool, default True
        Return an ``xarray.DataTree`` (as ``pm.sample_smc``); else a :class:`SamplerResult`.
    idata_kwargs : dict, optional
        ``coords``/``dims`` overrides and ``log_likelihood=True`` (adds the pointwise
        log-likelihood group via ``pm.compute_log_likelihood``).
    compile_kwargs : dict, optional
        Passed to ``pytensor.function``.
    model : pymc.Model, optional
        Defaults to the model on the context stack.
    init : "auto", "prior", "laplace", dict or GaussianInitial, default "auto"
        Initial distribution ``q0`` (see :func:`pymc_crais.samplers.engine.init_option.build_initial`):
        ``"auto"`` checks a Laplace fit (converged, interior mode, a single mode found by
        short optimizations from prior draws, the Pareto k̂ of a pilot's weights) and starts
        from a Student-t there, a widened one, a Student-t at each of several modes found
        mixed half and half with the prior (``init_choice == "modes"``), or the prior (what
        it chose and why:
        attributes ``init_choice``, ``init_reason``; its evaluations are counted in
        ``n_logp_evals_laplace``; ``sample_crais`` and ``sample_smc`` may then anneal to a
        start, ``init_choice == "annealed"``, docs/algorithms.md); ``"prior"``; a Student-t (or Gaussian) at the Laplace fit;
        or a user-given normalized Gaussian ``{"mean": ..., "cov": ...}`` in the model's
        unconstrained coordinates.
    init_kwargs : dict, optional
        ``df``, ``scale``, ``family`` for ``init="laplace"``.
    n_mcmc_steps : int, default 1
        Kernel transitions per annealing step.
    kernel_kwargs : dict, optional
        Options of a named kernel (``n_leapfrog``, ``step_size``, ``target_accept``...).
    schedule_kwargs : dict, optional
        Options of a named fixed schedule (``scale`` for sigmoid, ``tau_min`` for exponential).
    rho : float, optional
        Target ratio of the ``"ess"``/``"cess"`` rules, in (0, 1) (default 0.9).
    max_step, min_step : float, optional
        Bounds on ``τ' − τ`` for adaptive schedules.
    max_steps : int, default 100000
        Cap on the number of stages of an adaptive schedule; reaching it jumps to τ = 1,
        warns and sets ``hit_max_steps``.
    scale_shift : float, "pilot" or None, default None
        The fixed ``c`` of a power-mean path (``log Z = c + log Z_c``). ``None`` means 0 for
        ``alpha=0`` and ``"pilot"`` otherwise: ``c`` is the ``log Ẑ`` of a geometric pilot
        run with ``min(draws, 256)`` particles, reported as ``n_logp_evals_pilot``.
    backend : str, optional
        PyTensor backend (``"c"``, ``"numba"``, ``"jax"``), as in ``pm.sample_smc``. The
        default is PyTensor's (Numba). With ``"jax"`` all chains run in this process and
        their particles are evaluated in one batched call per step (``cores`` is unused),
        which is what an accelerator wants; JAX needs static shapes (some models fail to
        compile); see ``benchmarks/reports/benchmarks.md``.
    mp_ctx : str or multiprocessing context, optional
        Start method of the worker processes (default: the platform's; with ``"fork"``
        the workers inherit the compiled model instead of unpickling and re-compiling it).
    executor : concurrent.futures.Executor, optional
        Runs the chains instead of a pool of ``cores`` local processes: any executor, e.g.
        a Dask ``distributed`` client's ``client.get_executor()`` to run them on a cluster.
        Each chain travels as cloudpickle bytes and its worker compiles the model again
        (from its own cache); same seed, same bits as local chains. The pilot and tuning
        runs stay in this process. The executor is not shut down.
    memory_budget : float, optional
        Bytes one batched model call may use (default 1 GiB): when ``N`` particles of a
        model with ``n`` observed values would need more (an estimate of 32 bytes per particle
        and value, 192 with JAX), the population is evaluated in blocks of particles. ``float("inf")``: one
        call, whatever its size. The same seed and budget give the same bits; another budget
        can round a BLAS product differently in the last bits, and so give another
        (statistically equivalent) run.
    path : {"geometric", "moment_averaging"}, default "geometric"
        ``"moment_averaging"`` (issue 15, seed 004; ``alpha=0`` only, not with the
        constant-rate rule): geometric from ``q0`` to a Gaussian with its moments (from
        exact draws), by moment averaging to the Laplace fit of the posterior (its model
        evaluations added to ``n_logp_evals_laplace``), then geometric to the posterior;
        continuous models with a gradient only. See ``docs/paths.md`` for when it helps.
    path_kwargs : dict, optional
        ``{"breaks": (t1, t2)}``: the τ where the moment-averaging path's three legs meet
        (default ``(1/3, 2/3)``).
    **crais_kwargs
        Only with ``schedule="constant_rate"``: arguments of :func:`sample_crais`.

    Returns
    -------
    xarray.DataTree or SamplerResult
        ``sample_stats.log_marginal_likelihood`` holds one ``log Ẑ`` per chain; combine
        them with :func:`pymc_crais.log_marginal_likelihood`.

    Examples
    --------
    >>> import pymc as pm, pymc_crais as pmc
    >>> with pm.Model():
    ...     mu = pm.Normal("mu", 0, 1)
    ...     pm.Normal("y", mu, 1, observed=[0.3, -0.2])
    ...     idata = pmc.sample_ais(draws=500, n_steps=50, random_seed=1, progressbar=False)
    >>> value, mcse = pmc.log_marginal_likelihood(idata)
    """
    settings = AISSettings(
        draws=draws,
        schedule=parse_schedule(schedule, AIS_SCHEDULES),
        n_steps=n_steps,
        alpha=alpha,
        kernel=kernel,
        chains=chains,
        cores=cores,
        random_seed=random_seed,
        progressbar=progressbar,
        return_inferencedata=return_inferencedata,
        idata_kwargs=idata_kwargs,
        compile_kwargs=compile_kwargs,
        model=model,
        init=init,
        init_kwargs=init_kwargs,
        n_mcmc_steps=n_mcmc_steps,
        kernel_kwargs=kernel_kwargs,
        schedule_kwargs=schedule_kwargs,
        rho=rho,
        max_step=max_step,
        min_step=min_step,
        max_steps=max_steps,
        scale_shift=scale_shift,
        backend=backend,
        mp_ctx=mp_ctx,
        executor=executor,
        memory_budget=memory_budget,
        path=path,
        path_kwargs=path_kwargs,
        crais_kwargs=crais_kwargs,
    )
    if settings.schedule.constant_rate:
        check_path(path, alpha, settings.schedule, path_kwargs)  # moment_averaging refused
        return sample_crais(**settings.crais_arguments())
    return plan_ais(settings).run()


@dataclass(frozen=True)
class AISSettings(RunArguments):
    """Every argument of :func:`sample_ais`, as given or defaulted there (its signature is
    the one place the defaults are written): built once per call and passed whole to
    :func:`plan_ais` (or, for ``schedule="constant_rate"``, handed to :func:`sample_crais`).
    ``schedule`` is the argument parsed (:func:`~pymc_crais.samplers.engine.schedule_option.parse_schedule`);
    ``crais_kwargs`` holds the keywords only :func:`sample_crais` takes."""

    schedule: ScheduleArg
    n_steps: int
    schedule_kwargs: dict | None
    rho: float | None
    max_step: float | None
    min_step: float | None
    max_steps: int
    path: str
    path_kwargs: dict | None
    crais_kwargs: dict

    def crais_arguments(self) -> dict:
        """The arguments :func:`sample_crais` gets for ``schedule="constant_rate"``."""
        names = (
            "draws", "alpha", "kernel", "chains", "cores", "random_seed", "progressbar",
            "return_inferencedata", "idata_kwargs", "compile_kwargs", "model", "init",
            "init_kwargs", "n_mcmc_steps", "kernel_kwargs", "max_step", "min_step", "max_steps",
            "scale_shift", "backend", "mp_ctx", "executor", "memory_budget", "n_steps",
        )  # fmt: skip
        # an argument left at sample_ais's default takes sample_crais's own default where the
        # two differ (n_steps, max_step, min_step, max_steps): sample_ais(schedule=
        # "constant_rate") is then sample_crais() with the same other arguments
        ais_defaults = _defaults(sample_ais)
        crais_defaults = _defaults(sample_crais)
        given = {
            k: getattr(self, k) for k in names
            if not (_same(getattr(self, k), ais_defaults[k])
                    and not _same(ais_defaults[k], crais_defaults[k]))
        }
        return {**given, **self.crais_kwargs}


def _defaults(fn) -> dict:
    return {k: p.default for k, p in inspect.signature(fn).parameters.items()}


def _same(a, b) -> bool:
    return type(a) is type(b) and a == b


def plan_ais(st: AISSettings) -> AnnealPlan:
    """:func:`sample_ais`'s checks, set-up and pilot: the run, ready for its chains."""
    path, path_kwargs = check_path(st.path, st.alpha, st.schedule, st.path_kwargs)
    if st.crais_kwargs:
        raise TypeError(f"sample_ais got unexpected arguments {sorted(st.crais_kwargs)}")
    t_start = time.perf_counter()
    arg, n_steps, alpha = st.schedule, st.n_steps, st.alpha
    make_path(alpha, 0.0)  # validates alpha before any compilation
    thermo = arg.kind == "thermodynamic"
    if thermo:
        n_steps = check_int(n_steps, "n_steps", 1, "e.g. n_steps=200")
        if st.schedule_kwargs:
            raise TypeError("schedule_kwargs only apply to linear/sigmoid/exponential schedules")
        if path != "geometric":
            raise ValueError("schedule='thermodynamic' needs path='geometric' (the metric of its pilot)")
        sched = None  # from the pilot's metric
    else:
        sched = arg.build(n_steps, st.schedule_kwargs, st.rho, st.max_step, st.min_step)
    max_steps = check_int(st.max_steps, "max_steps", 1, "e.g. max_steps=10000")
    setup = prepare(RunOptions.from_settings(st))
    attrs = {
        "method": "ais",
        "path": make_path(alpha, 0.0).name,
        "alpha": float(alpha),
        **setup.attrs,
        **(sched.describe() if sched is not None else {"schedule": "thermodynamic", "n_steps": n_steps}),
    }
    if thermo:
        c, sched = thermodynamic_pilot(setup, alpha, st.scale_shift, n_steps, attrs)
        attrs.update(sched.describe(), schedule="thermodynamic")
    else:
        # the scale shift's pilot: a shorter version of a named fixed schedule, else the same
        short = max(int(n_steps) // 4, 10) if arg.kind == "fixed" else None
        pilot_sched = arg.build(short, st.schedule_kwargs) if short is not None else sched
        c, _ = scale_shift_pilot(setup, alpha, st.scale_shift, attrs, schedule=pilot_sched)
    options = AnnealOptions.from_settings(n_mcmc_steps=int(st.n_mcmc_steps), max_stages=int(max_steps))
    path = build_path(setup, path, alpha, c, attrs, path_kwargs)
    return AnnealPlan(setup, path, sched, "AIS", options, attrs, {}, t_start)
