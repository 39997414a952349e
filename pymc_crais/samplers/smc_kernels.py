"""Drop-in kernels for ``pm.sample_smc(kernel=...)``: our samplers' runs under PyMC's driver.

``pm.sample_smc`` builds its kernel once, then for each chain calls ``initialize`` and,
until β = 1, ``update_beta_and_weights`` and ``step``. These kernels keep PyMC's driver
(its chains, processes, progress bar and output) but each of them *is* one of our
samplers:

* :class:`BatchedSMC` is :func:`pymc_crais.sample_smc` (ESS tempering with PyMC's
  ``threshold``), :class:`CRSMC` is ``sample_smc(schedule="constant_rate")`` and
  :class:`CRAIS` is :func:`pymc_crais.sample_crais`;
* the run-level work (checks, compilation, the automatic start ``init="auto"`` with its
  exact importance weights, pilots, CR-AIS's tuning run) is done once when PyMC builds the
  kernel, for the number of chains that ``pm.sample_smc`` runs (:func:`driver_chains`: the
  ``target_mcse`` of CR-AIS, CR-SMC and the ESS rule's one-stage test is pooled over them, as in our samplers) (:func:`~pymc_crais.samplers.smc.plan_smc`,
  :func:`~pymc_crais.samplers.engine.crais_plan.plan_crais`);
* each chain is the same annealing task as in our samplers, driven one stage per
  ``update_beta_and_weights`` (:func:`~pymc_crais.samplers.engine.anneal_chain.iter_anneal_chain`):
  the stage's reweighting, resampling and moves happen there, so ``resample``, ``tune`` and
  ``mutate`` have nothing left to do.

A chain therefore gives the same ``log Z`` and draws as a chain of our sampler with the
same generator, and every argument of that sampler (``max_steps``, ``n_mcmc_steps``,
``init``, ``n_steps``...) is accepted. At β = 1 each chain's run checks itself as ours do
(:func:`pymc_crais.diagnostics.check_chains`), and the last stage's ``sample_stats`` carry
the chain's within-chain error ``log_marginal_likelihood_mcse`` and its diagnostics, which
:func:`pymc_crais.log_marginal_likelihood`, :func:`pymc_crais.compare` and
:func:`pymc_crais.diagnose` read.
"""

from __future__ import annotations

import numpy as np
from pymc.smc.kernels import SMC_KERNEL

from ..chain_result import ChainResult
from .engine.anneal_chain import AnnealPlan, iter_anneal_chain
from .engine.compile import parameter_layout
from .engine.runner import one_blas_thread
from .engine.term_checks import explain_model_errors

__all__ = ["CRAIS", "CRSMC", "DROP_IN_FINAL_STATS", "BatchedSMC", "driver_chains"]

DROP_IN_FINAL_STATS = (
    "log_marginal_likelihood_mcse",
    "pareto_k_final",
    "pareto_k_max",
    "pareto_k_initial",
    "n_eves",
    "n_resamplings",
    "move_correlation_mean",
    "move_correlation_stuck_fraction",
    "hit_max_steps",
    "n_logp_evals",
)
"""Per-chain statistics a drop-in kernel reports at its last stage only (NaN before)."""

_DRIVER_OWNED = (
    "chains",
    "cores",
    "random_seed",
    "progressbar",
    "return_inferencedata",
    "idata_kwargs",
    "mp_ctx",
    "executor",
)


def driver_chains(default: int = 1) -> int:
    """The number of chains the ``pm.sample_smc`` call building this kernel runs.

    PyMC builds the kernel once, before its chains, and tells it neither their number nor
    a chain's index; the run-level work (the start check, CR-AIS's length, CR-SMC's
    one-stage decision) sizes the run for ``target_mcse`` pooled over the chains, as
    :func:`pymc_crais.sample_crais` and :func:`pymc_crais.sample_smc` do with their
    ``chains``. So the count is read from the calling ``pm.sample_smc`` frame (its local
    ``chains``, already resolved to ``max(2, cores)`` when not given); ``default`` when the
    kernel is built outside ``pm.sample_smc``.
    """
    import sys

    from pymc.smc import sampling

    code = sampling.sample_smc.__code__
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            chains = frame.f_locals.get("chains")
            if isinstance(chains, int | np.integer) and chains >= 1:
                return int(chains)
            break
        frame = frame.f_back
    return int(default)


class _PlannedKernel(SMC_KERNEL):
    """One of our samplers' runs, its chains driven stage by stage by ``pm.sample_smc``."""

    label = ""
    threshold_refusal = ""  # why a kernel refuses PyMC's threshold= (empty: it uses it)
    stats_dtypes_shapes: dict = {  # noqa: RUF012 (PyMC's class attribute)
        "log_marginal_likelihood": (float, []),
        "beta": (float, []),
        "ess": (float, []),
        "accept_rate": (float, []),
        "n_mcmc_steps": (int, []),
        **{k: (float, []) for k in DROP_IN_FINAL_STATS},
    }

    def __init__(
        self,
        draws=2000,
        start=None,
        model=None,
        random_seed=None,
        threshold=None,
        compile_kwargs=None,
        mutation="auto",
        mutation_kwargs=None,
        **options,
    ):
        # SMC_KERNEL.__init__ is not called: it compiles PyMC's one-particle log-densities,
        # which these kernels never evaluate (ours are compiled once, batched, by the plan)
        import pymc as pm

        name = type(self).__name__
        for key in _DRIVER_OWNED:
            if key == "executor" and key in options:
                raise TypeError(
                    f"{name}: pm.sample_smc runs the chains itself, so executor= has no effect "
                    "here; use pmc.sample_smc(executor=...) to run chains on an executor"
                )
            if key in options:
                raise TypeError(
                    f"{name}: {key}= is pm.sample_smc's own argument; pass it to pm.sample_smc"
                )
        if options.get("reparameterize") not in (None, "none"):
            raise TypeError(
                f"{name}: reparameterize= changes the model's free variables, which "
                "pm.sample_smc maps back itself; use pmc.sample_smc(reparameterize=...)"
            )
        for key in ("kernel", "kernel_kwargs"):
            if key in options:
                raise TypeError(
                    f"{name}: kernel= is pm.sample_smc's (this class); name the MCMC kernel "
                    f"with mutation= (and its options with mutation_kwargs=)"
                )
        model = pm.modelcontext(model)
        self.draws = draws
        self.start = start
        self.model = model
        self.threshold = threshold
        self.variables = model.value_vars
        layout = parameter_layout(model)
        self.var_info = {s.name: (s.shape, s.stop - s.start) for s in layout.slots}
        ckw = dict(compile_kwargs or {})
        ckw.pop("on_unused_input", None)
        arguments = dict(
            options,
            draws=draws,
            model=model,
            random_seed=random_seed,
            chains=driver_chains(),  # pooled target_mcse over pm.sample_smc's chains
            cores=1,
            progressbar=False,
            compile_kwargs=ckw or None,
            kernel=mutation,
            kernel_kwargs=mutation_kwargs,
        )
        if threshold is not None:
            if self.threshold_refusal:
                raise TypeError(f"{name}: threshold= is the ESS rule's; {self.threshold_refusal}")
            arguments["threshold"] = threshold
        with one_blas_thread(), explain_model_errors(model):
            try:
                self._plan: AnnealPlan = self._make_plan(arguments)
            except TypeError as err:
                raise TypeError(f"{name}: {err}") from None
        from ..results import netcdf_attr

        settings = {"pymc_crais_kernel": name, **self._plan.attrs}
        # PyMC writes them as sample_stats attributes: types netCDF can store, as ours
        self._settings = {k: netcdf_attr(v) for k, v in settings.items()}
        self.rng = np.random.default_rng(random_seed)
        self._reset_state()
        self._stages = None
        self._stage = None
        self._final: ChainResult | None = None

    def _make_plan(self, arguments: dict) -> AnnealPlan:
        raise NotImplementedError

    # --- PyMC's driver ------------------------------------------------------------------
    def initialize(self, start, rng: np.random.Generator) -> None:
        """Start a chain with PyMC's generator for it: fresh draws from the plan's ``q0``."""
        if start is not None:
            raise ValueError(
                f"{type(self).__name__} does not take start points: log Z needs exact draws "
                "from the initial distribution; choose it with init= ('auto', 'prior', "
                "'laplace' or a Gaussian) instead"
            )
        self.start = None
        self.rng = rng
        self._reset_state()
        self._final, self._stage = None, None
        self._stages = iter_anneal_chain(self._plan.task(0, rng))

    def set_rng(self, rng: np.random.Generator) -> None:
        self.rng = rng  # no PyMC functions to copy

    def update_beta_and_weights(self):
        """One whole stage of the chain: next β, reweighting, resampling and moves."""
        if self._stages is None:
            raise RuntimeError("call initialize(start, rng) before the first stage")
        self.iteration += 1
        with one_blas_thread(), explain_model_errors(self.model):
            stage = next(self._stages)
            self._stage = stage
            self.beta = float(stage.tau)
            self.log_marginal_likelihood = float(stage.log_marginal_likelihood)
            if stage.tau >= 1.0:
                try:
                    next(self._stages)
                except StopIteration as done:
                    self._finish_chain(done.value)
                else:  # pragma: no cover - the loop stops at tau = 1
                    raise RuntimeError("the annealing loop went on after tau = 1")

    def _finish_chain(self, chain: ChainResult) -> None:
        from ..diagnostics import check_chains

        attrs = dict(self._plan.attrs)
        (checked,) = check_chains([chain], attrs)  # warns here if the chain is unreliable
        self._final = checked
        self._stages = None
        self.tempered_posterior = checked.x
        self.log_marginal_likelihood = float(checked.log_marginal_likelihood)

    def resample(self):
        """Nothing: the stage resampled (when its policy wanted) in
        :meth:`update_beta_and_weights`."""

    def tune(self):
        """Nothing: the stage's kernel was tuned in :meth:`update_beta_and_weights`."""

    def mutate(self):
        """Nothing: the stage's moves were made in :meth:`update_beta_and_weights`."""

    def sample_stats(self) -> dict:
        st = self._stage
        out = {
            "log_marginal_likelihood": self.log_marginal_likelihood,
            "beta": self.beta,
            "ess": float(st.ess) if st is not None else np.nan,
            "accept_rate": float(st.acceptance_rate) if st is not None else np.nan,
            "n_mcmc_steps": int(st.n_mcmc_steps) if st is not None else 0,
        }
        out.update(dict.fromkeys(DROP_IN_FINAL_STATS, np.nan))
        if self._final is not None:
            out.update(self._final_stats(self._final))
        return out

    @staticmethod
    def _final_stats(chain: ChainResult) -> dict:
        from ..diagnostic_checks import chain_row

        row = chain_row(chain.as_dict())
        out = {k: float(row[k]) for k in DROP_IN_FINAL_STATS if k in row}
        out["log_marginal_likelihood_mcse"] = float(np.sqrt(chain.log_z_variance))
        out["n_resamplings"] = float(chain.stats.get("n_resamplings", 0))
        out["hit_max_steps"] = float(bool(chain.hit_max_steps))
        out["n_logp_evals"] = float(chain.n_logp_evals)
        return out

    def sample_settings(self) -> dict:
        return dict(self._settings)


class BatchedSMC(_PlannedKernel):
    """:func:`pymc_crais.sample_smc` as a ``pm.sample_smc`` kernel: ESS-adaptive tempering.

    ``pm.sample_smc(kernel=pmc.BatchedSMC)`` with nothing else runs, per chain, what
    ``pmc.sample_smc()`` runs with its defaults: the automatic start (``init="auto"``),
    each next β where the ESS falls to ``threshold · N`` (PyMC's rule and default 0.5; at
    that default one stage where the start's weights already meet ``target_mcse``, 0.02),
    resampling, and batched moves (``mutation="auto"``) until the particles decorrelate.

    Parameters
    ----------
    mutation : {"auto", "hmc", "mala", "rwmh", "mh", "imh", "imh_then_hmc", "hmc_final_imh"} or MutationKernel, default "auto"
        The MCMC kernel that moves the particles (``kernel=`` of :func:`pymc_crais.sample_smc`:
        ``"auto"`` is ``"hmc_final_imh"`` on continuous models, ``"imh"`` with discrete
        variables).
    mutation_kwargs : dict, optional
        Its options (``kernel_kwargs=`` of :func:`pymc_crais.sample_smc`).
    threshold : float, default 0.5
        ESS fraction of the tempering rule (PyMC's name and default).
    **options
        Any other argument of :func:`pymc_crais.sample_smc` (``schedule``, ``init``,
        ``n_mcmc_steps``, ``max_steps``, ``max_mcmc_steps``, ``waste_free``...), except
        those ``pm.sample_smc`` owns (``chains``, ``cores``, ``random_seed``,
        ``progressbar``); ``draws``, ``model`` and ``compile_kwargs`` come from
        ``pm.sample_smc``.
    """

    label = "SMC"
    threshold_refusal = ""  # PyMC's threshold is this kernel's ESS fraction

    def _make_plan(self, arguments):
        from .smc import plan_smc

        return plan_smc(**arguments)


class CRSMC(_PlannedKernel):
    """CR-SMC, ``pmc.sample_smc(schedule="constant_rate")``, as a ``pm.sample_smc`` kernel.

    Each next β lowers the divergence to the posterior by the same rate δ (Goshtasbpour et
    al. 2023); δ comes from a pilot so that a chain has about ``n_steps`` stages (default
    100), and the particles are resampled when their ESS falls below 0.9 N. By default it
    starts where :func:`pymc_crais.sample_smc` starts (on latent-Gaussian models the
    conditional-Laplace start, one importance stage; where the Laplace fit failed, the
    annealed start), and a start whose importance weights
    already meet ``target_mcse`` (0.02 nats, pooled over the chains ``pm.sample_smc`` runs)
    is one stage. A stage that resampled moves the particles until they decorrelate; one that
    kept its weights makes one transition (``idle_mcmc_steps``).

    Parameters
    ----------
    mutation, mutation_kwargs
        As :class:`BatchedSMC`.
    **options
        Any other argument of :func:`pymc_crais.sample_smc` with
        ``schedule="constant_rate"`` (``delta``, ``n_steps``, ``max_step``, ``init``,
        ``n_mcmc_steps``, ``max_steps``...), except those ``pm.sample_smc`` owns.
    """

    label = "CR-SMC"
    threshold_refusal = "CRSMC picks each beta by a constant rate (delta=, or n_steps=)"

    def _make_plan(self, arguments):
        from .smc import plan_smc

        if arguments.get("schedule", "constant_rate") != "constant_rate":
            raise TypeError("CRSMC's schedule is 'constant_rate'; use BatchedSMC for others")
        arguments["schedule"] = "constant_rate"
        return plan_smc(**arguments)


class CRAIS(_PlannedKernel):
    """Constant-rate AIS, :func:`pymc_crais.sample_crais`, as a ``pm.sample_smc`` kernel.

    When PyMC builds the kernel, the pilot and the constant-rate tuning run fix the
    schedule (``n_steps="auto"``: the fewest steps predicted to meet ``target_mcse``, 0.02
    nats pooled over the chains ``pm.sample_smc`` runs; one step, with no pilot or tuning run, when the start's importance weights
    already meet it) and the kernels' parameters once; each chain
    then anneals fresh draws of the start on that schedule without resampling (its weights
    accumulate: the AIS estimate, unbiased for ``Z``) and resamples once at β = 1 into
    equal-weight posterior draws.

    Parameters
    ----------
    mutation, mutation_kwargs
        As :class:`BatchedSMC` (``kernel=`` and ``kernel_kwargs=`` of
        :func:`pymc_crais.sample_crais`; ``"auto"`` is ``"hmc"`` on continuous models).
    **options
        Any other argument of :func:`pymc_crais.sample_crais` (``n_steps``, ``delta``,
        ``n_tune_steps``, ``init``, ``n_mcmc_steps``, ``max_steps``, ``alpha``...), except
        those ``pm.sample_smc`` owns.
    """

    label = "CR-AIS"
    threshold_refusal = "CRAIS anneals on a tuned constant-rate schedule (n_steps=, delta=)"

    def _make_plan(self, arguments):
        import inspect

        from .crais import sample_crais
        from .engine.crais_plan import CRAISSettings, plan_crais

        # sample_crais's signature is where its defaults live (and names a bad argument)
        bound = inspect.signature(sample_crais).bind(**arguments)
        bound.apply_defaults()
        return plan_crais(CRAISSettings(**bound.arguments))
