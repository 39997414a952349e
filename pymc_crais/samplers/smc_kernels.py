"""Drop-in kernels for ``pm.sample_smc(kernel=...)`` that evaluate all particles at once.

``pm.sample_smc`` calls its kernel's hooks every stage: ``update_beta_and_weights``,
``resample``, ``tune``, ``mutate``. PyMC's own kernels evaluate the compiled log-density
once per particle in a Python loop. These subclasses keep PyMC's driver, output and
multiprocessing, but

* draw the initial particles from the prior with one vectorized call (ignoring custom
  ``initval``s, which would otherwise place every particle on the same point and make
  ``log Z`` wrong),
* evaluate prior and likelihood (and gradients) of the whole population in one call,
* mutate with a batched pymc_crais kernel (``"auto"`` default: ``"hmc"``, or ``"imh"`` on
  discrete models; ``"mala"``, ``"rwmh"``/``"mh"``, ``"imh"``), moving until the correlation with the stage's start stops falling.

:class:`BatchedSMC` keeps PyMC's ESS-based tempering (``threshold``); :class:`CRSMC` picks
each next β with the constant-rate rule (CR-SMC); :class:`CRAIS` tunes a constant-rate
schedule first and then anneals without resampling (CR-AIS), its weights accumulating.
"""

from __future__ import annotations

import numpy as np
from pymc.smc.kernels import SMC_KERNEL

from ..core.adaptive import ConstantRateSchedule
from ..core.kernel_base import ParamsByTau
from ..core.kernels import make_kernel
from ..core.moves import Moves
from ..core.particles import ParticleState
from ..core.paths import make_path
from ..core.schedules import interpolate_schedule
from ..core.weights import (
    clean_log_weights,
    log_z_relative_variance,
    logsumexp,
    normalized_weights,
)
from .compile import compile_model_density, parameter_layout
from .options import check_int, check_rate, is_auto
from .kernel_choice import resolve_kernel
from .prior import prior_sampler
from .tuning import PILOT_DRAWS, RateProbe, constant_rate_run, pilot_run, rate_for_steps

__all__ = ["CRAIS", "CRSMC", "BatchedSMC"]


class BatchedSMC(SMC_KERNEL):
    """ESS-adaptive tempering (as PyMC's IMH/MH kernels) with batched evaluation and moves.

    Parameters
    ----------
    mutation : {"auto", "hmc", "mala", "rwmh", "mh", "imh", "imh_then_hmc", "hmc_final_imh"} or MutationKernel, default "auto"
        Batched kernel moving the particles (``"auto"``: ``"hmc"``, or ``"imh"`` when the
        model has discrete variables; :func:`pymc_crais.sample_smc`'s continuous default
        ``"hmc_final_imh"`` is not chosen here, but may be named).
    mutation_kwargs : dict, optional
        Options of that kernel (e.g. ``n_leapfrog``).
    n_mcmc_steps : int, "auto" or "pymc", default "auto"
        Transitions per stage: ``"auto"`` until the 0.9-quantile of the coordinates'
        correlations with the stage's start is below ``max_correlation``; ``"pymc"`` while
        one transition lowers the mean correlation by at least ``correlation_threshold``
        (PyMC's rule); at most ``max_mcmc_steps`` (see :mod:`pymc_crais.core.moves`).
    max_correlation : float, default 0.1
    correlation_threshold : float, default 0.01
    max_mcmc_steps : int, default 20
        Cap on moves per stage.
    **kwargs
        ``draws``, ``start``, ``model``, ``random_seed``, ``threshold``, ``compile_kwargs``
        (passed by ``pm.sample_smc``).
    """

    stats_dtypes_shapes: dict = {
        "log_marginal_likelihood": (float, []),
        "beta": (float, []),
        "accept_rate": (float, []),
        "n_mcmc_steps": (int, []),
    }

    def __init__(
        self,
        *args,
        mutation="auto",
        mutation_kwargs=None,
        correlation_threshold=0.01,
        max_mcmc_steps=20,
        n_mcmc_steps="auto",
        max_correlation=0.1,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        import pymc as pm

        model = pm.modelcontext(kwargs.get("model"))
        layout = parameter_layout(model)
        mutation, _ = resolve_kernel(mutation, mutation_kwargs, layout)
        self._mutation = (mutation, dict(mutation_kwargs or {}))
        self._kernel = make_kernel(mutation, **dict(mutation_kwargs or {}))
        if self._kernel.needs_gradient and layout.has_discrete:
            raise ValueError(
                f"mutation={self._kernel.name!r} needs gradients but the model has discrete "
                f"variables {layout.discrete_names}; use mutation='rwmh' or 'imh'"
            )
        ckw = dict(kwargs.get("compile_kwargs") or {})
        ckw.pop("on_unused_input", None)
        self._density = compile_model_density(
            model, gradient=self._kernel.needs_gradient, compile_kwargs=ckw
        )
        self._prior = prior_sampler(model, layout, ckw)
        if not 0.0 <= correlation_threshold < 1.0:
            raise ValueError(
                f"correlation_threshold must be in [0, 1), got {correlation_threshold}"
            )
        self.correlation_threshold = float(correlation_threshold)
        self.max_mcmc_steps = int(max_mcmc_steps)
        self._moves = Moves.from_setting(
            n_mcmc_steps, self.max_mcmc_steps, self.correlation_threshold, max_correlation
        )
        self._grads = None
        self._params = None
        self._info = None
        self.acc_rate = np.nan
        self.n_mcmc = 0

    def _new_kernel(self):
        mutation, kw = self._mutation
        return make_kernel(mutation, **kw) if isinstance(mutation, str) else self._kernel

    def _pilot_rate(self, n_steps: int) -> float:
        """The rate ``δ`` for about ``n_steps`` constant-rate steps, from the shared rate
        pilot (:mod:`pymc_crais.samplers.tuning`) on fresh prior draws."""
        probe = RateProbe(0.0)
        x0 = self._prior.draw(self.rng, min(self.draws, PILOT_DRAWS))
        pilot = pilot_run(self.rng, self._density, x0, self._new_kernel(), None, probe)
        return rate_for_steps(probe.total_rate(pilot.log_marginal_likelihood, 0.0), n_steps)

    # --- population -------------------------------------------------------------------
    def _state(self) -> ParticleState:
        gq, gd = self._grads if self._grads is not None else (None, None)
        return ParticleState(self.tempered_posterior, self.prior_logp, self.likelihood_logp, gq, gd)

    def _store(self, state: ParticleState) -> None:
        self.tempered_posterior = state.x
        self.prior_logp = state.log_q0
        self.likelihood_logp = state.delta
        self._grads = (state.grad_log_q0, state.grad_delta) if state.has_gradient else None
        self.tempered_posterior_logp = self.prior_logp + self.beta * self.likelihood_logp

    def _initialize_kernel(self):
        # pm.sample_smc re-uses one kernel object for sequential chains: forget the last chain
        self._grads, self._info, self.acc_rate, self.n_mcmc = None, None, np.nan, 0
        if self.start:
            x = np.column_stack(
                [
                    np.asarray(self.start[v.name], dtype=np.float64).reshape(self.draws, -1)
                    for v in self.variables
                ]
            )
        else:
            x = self._prior.draw(self.rng, self.draws)
        self._store(ParticleState.evaluate(self._density, x, gradient=self._kernel.needs_gradient))
        self._params = self._kernel.init(self._state())

    def resample(self):
        grads = self._grads
        super().resample()
        if grads is not None:
            self._grads = (grads[0][self.resampling_indexes], grads[1][self.resampling_indexes])

    def tune(self):
        self._params = self._kernel.tune(self._params, self._state(), self._info, None)

    def mutate(self):
        res = self._moves.run(
            self.rng, self._kernel, self._state(), self._density, make_path(0.0),
            float(self.beta), self._params,
            tune=lambda p, s, i: self._kernel.tune(p, s, i, None), info=self._info,
        )
        self._params, self._info = res.params, res.info
        self._store(res.state)
        self.acc_rate = float(np.mean(res.acceptance_rates))
        self.n_mcmc = res.n_steps

    def sample_stats(self):
        return {
            "log_marginal_likelihood": self.log_marginal_likelihood if self.beta == 1 else np.nan,
            "beta": self.beta,
            "accept_rate": self.acc_rate,
            "n_mcmc_steps": self.n_mcmc,
        }

    def sample_settings(self):
        return {
            "_n_draws": self.draws,
            "threshold": self.threshold,
            "mutation": self._kernel.name,
            "correlation_threshold": self.correlation_threshold,
            "max_mcmc_steps": self.max_mcmc_steps,
        }


class CRSMC(BatchedSMC):
    """CR-SMC: constant-rate tempering (Goshtasbpour et al. 2023) for ``pm.sample_smc``.

    Each next β lowers ``KL(γ_β ‖ posterior)`` by about ``delta`` (geometric path). PyMC's
    driver resamples every stage, so the rule sees uniform weights.

    Parameters
    ----------
    delta : float or "auto", default "auto"
        The rate. ``"auto"`` runs a 256-particle geometric pilot on a 32-step exponential
        schedule at the start of each chain and sets ``δ = KL(prior ‖ posterior) / n_stages``
        with the KL estimated as the pilot's ``log Ẑ`` minus the prior mean of ``ℓ``.
    n_stages : int, default 50
        Target number of stages for ``delta="auto"``.
    max_step : float, default 0.125
        Largest step in β.
    **kwargs
        As :class:`BatchedSMC`.
    """

    def __init__(self, *args, delta="auto", n_stages=50, max_step=0.125, **kwargs):
        super().__init__(*args, **kwargs)
        delta = check_rate(delta)
        if int(n_stages) != n_stages or n_stages < 1:
            raise ValueError(f"n_stages must be a positive integer, got {n_stages}")
        self.delta_setting = delta
        self.n_stages = int(n_stages)
        self.max_step = float(max_step)
        self._rule = None

    def setup_kernel(self):
        delta = self.delta_setting
        self.delta = self._pilot_rate(self.n_stages) if is_auto(delta) else float(delta)
        self._rule = ConstantRateSchedule(self.delta, max_step=self.max_step)

    def update_beta_and_weights(self):
        self.iteration += 1
        old_beta = self.beta
        state = self._state()
        new_beta = self._rule.next_tau(
            self.iteration - 1, old_beta, state, np.zeros(self.draws), make_path(0.0)
        )
        log_weights_un = (new_beta - old_beta) * self.likelihood_logp
        log_weights_un = np.where(np.isnan(log_weights_un), -np.inf, log_weights_un)
        total = logsumexp(log_weights_un)
        self.beta = float(new_beta)
        self.weights = np.exp(log_weights_un - total)
        self.weights /= self.weights.sum()
        self.log_marginal_likelihood += total - np.log(self.draws)

    def sample_settings(self):
        return {**super().sample_settings(), "delta": self.delta, "max_step": self.max_step}


class CRAIS(BatchedSMC):
    """CR-AIS (Goshtasbpour et al. 2023) for ``pm.sample_smc``: tune, then anneal unresampled.

    At the start of each chain, as :func:`pymc_crais.sample_crais` with ``alpha=0``: a pilot
    fixes the rate (``delta="auto"``), a constant-rate tuning run with ``draws`` fresh
    particles gives the schedule (:mod:`pymc_crais.samplers.tuning`), interpolated to
    ``n_steps`` steps. PyMC's driver then anneals its own prior particles on that fixed
    schedule. No particle is resampled before β = 1: the weights accumulate as in AIS, so
    ``log_marginal_likelihood`` is the AIS estimate (unbiased for ``Z``) and
    ``log_marginal_likelihood_mcse`` its within-chain error; at β = 1 the weighted particles
    are resampled once into equal-weight posterior draws. Kernels replay the tuning run's
    parameters (``replay_kernel=True``), fixed before the final particles exist.

    Parameters
    ----------
    delta : float or "auto", default "auto"
        The rate of the tuning run; ``"auto"``: from the pilot, so that the tuning run has
        about ``n_tune_steps`` steps (re-scaled up to 3 times, as in ``sample_crais``).
    n_steps : int, default 200
        Steps of the annealing run (the tuned schedule interpolated).
    n_tune_steps : int, optional
        Target length of the tuning run (default ``max(32, n_steps // 4)``).
    n_mcmc_steps : int, default 1
        Kernel transitions per step.
    max_step : float, default 0.125
        Largest step in β of the tuning run.
    replay_kernel : bool, default True
        Re-use the tuning run's kernel parameters (looked up by β) instead of tuning on the
        annealed particles.
    **kwargs
        As :class:`BatchedSMC` (``mutation``, ``mutation_kwargs``; ``threshold``,
        ``correlation_threshold`` and ``max_mcmc_steps`` are not used).
    """

    stats_dtypes_shapes: dict = {  # noqa: RUF012 (PyMC's class attribute)
        **BatchedSMC.stats_dtypes_shapes,
        "log_marginal_likelihood_mcse": (float, []),
    }

    def __init__(
        self,
        *args,
        delta="auto",
        n_steps=200,
        n_tune_steps=None,
        n_mcmc_steps=1,
        max_step=0.125,
        replay_kernel=True,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.delta_setting = check_rate(delta)
        self.n_steps = check_int(n_steps, "n_steps", 1, "e.g. n_steps=200")
        if n_tune_steps is None:
            n_tune_steps = max(32, self.n_steps // 4)
        self.n_tune_steps = check_int(n_tune_steps, "n_tune_steps", 2, "e.g. n_tune_steps=64")
        self.n_mcmc_steps = check_int(n_mcmc_steps, "n_mcmc_steps", 1, "e.g. n_mcmc_steps=1")
        self.max_step = float(max_step)
        self.replay_kernel = bool(replay_kernel)
        self.schedule = None
        self._replay = None
        self._log_w = None
        self._log_z_variance = np.nan

    def setup_kernel(self):
        auto = is_auto(self.delta_setting)
        delta = self._pilot_rate(self.n_tune_steps) if auto else self.delta_setting
        tuning = constant_rate_run(
            self.rng,
            self._density,
            self._prior.draw,
            self._new_kernel,
            make_path(0.0),
            delta,
            draws=self.draws,
            max_steps=4 * self.n_tune_steps if auto else 10_000,
            n_target=self.n_tune_steps if auto else None,
            max_step=self.max_step,
            n_mcmc_steps=self.n_mcmc_steps,
        )
        self.delta = tuning.delta
        self.n_logp_evals_tune = tuning.n_logp_evals
        self.schedule = interpolate_schedule(tuning.schedule, self.n_steps)
        res = tuning.result
        self._replay = (
            ParamsByTau(res.stages["tau"], res.kernel_params) if self.replay_kernel else None
        )
        self._log_w = np.zeros(self.draws)
        self._log_z_variance = np.nan

    def update_beta_and_weights(self):
        self.iteration += 1
        old_beta, new_beta = self.beta, float(self.schedule[self.iteration])
        incr = make_path(0.0).log_increment(old_beta, new_beta, self.likelihood_logp)
        log_w_norm = self._log_w - logsumexp(self._log_w)
        self.log_marginal_likelihood += logsumexp(log_w_norm + incr)
        self._log_w = clean_log_weights(self._log_w + incr)
        self.beta = new_beta
        self.weights = normalized_weights(self._log_w)
        if new_beta >= 1.0:
            self._log_z_variance = log_z_relative_variance(self._log_w)

    def resample(self):
        if self.beta >= 1.0:  # once, into equal-weight posterior draws
            super().resample()

    def tune(self):
        if self._replay is None:
            super().tune()
        else:
            self._params = self._replay(self.beta)

    def mutate(self):
        state, acc = self._state(), []
        for _ in range(self.n_mcmc_steps):
            state, self._info = self._kernel.step(
                self.rng, state, self._density, make_path(0.0), float(self.beta), self._params
            )
            acc.append(self._info.acceptance_rate)
        self._store(state)
        self.acc_rate = float(np.mean(acc))
        self.n_mcmc = len(acc)

    def sample_stats(self):
        final = self.beta >= 1.0
        return {
            **super().sample_stats(),
            "log_marginal_likelihood_mcse": np.sqrt(self._log_z_variance) if final else np.nan,
        }

    def sample_settings(self):
        return {
            **super().sample_settings(),
            "delta": self.delta,
            "n_steps": self.n_steps,
            "n_tune_steps": self.n_tune_steps,
            "n_logp_evals_tune": self.n_logp_evals_tune,
            "replay_kernel": self.replay_kernel,
        }
