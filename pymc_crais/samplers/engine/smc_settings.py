"""``sample_smc``'s own options (its ``**kernel_kwargs``) as one typed object.

:class:`SMCSettings` holds every option of :func:`pymc_crais.sample_smc` beyond the
arguments it shares with PyMC's ``pm.sample_smc``, each default written once here, checked
once, and read by :func:`pymc_crais.samplers.smc.plan_smc` (and the ``pm.sample_smc``
kernels :class:`pymc_crais.BatchedSMC` and :class:`pymc_crais.CRSMC`, which hand their
arguments to it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

import numpy as np

from ...core.anneal import AnnealOptions
from ...core.kernels.moves import CORRELATION_THRESHOLD, MAX_CORRELATION, MAX_MCMC_STEPS
from ...core.schedules.adaptive import ConstantRateSchedule
from .options import check_int, is_auto
from .schedule_option import SMC_SCHEDULES, parse_schedule
from .start_point import check_target_mcse

__all__ = ["WASTE_FREE_LENGTH", "SMCSettings"]

WASTE_FREE_LENGTH = 10
"""The chain length ``P`` of ``waste_free=True``."""


@dataclass(frozen=True)
class SMCSettings:
    """The options of :func:`pymc_crais.sample_smc` beyond PyMC's (see its docstring for
    each; :meth:`from_kwargs` builds it, with ``schedule`` parsed into a
    :class:`~pymc_crais.samplers.engine.schedule_option.ScheduleArg`). ``resample`` and
    ``resample_threshold`` default by schedule (``"ess"`` and 0.9
    for ``schedule="constant_rate"``, as the CR-SMC paper; ``"always"`` and 0.5 otherwise);
    ``waste_free`` is resolved to a chain length (0: off)."""

    schedule: object = "ess"
    threshold: float = 0.5
    alpha: float = 0.0
    delta: object = "auto"
    n_steps: int | None = None
    target_mcse: float | None = None
    resample: str | None = None
    resample_threshold: float | None = None
    resampler: str = "systematic"
    n_mcmc_steps: object = "auto"
    idle_mcmc_steps: object = "auto"
    max_mcmc_steps: int = MAX_MCMC_STEPS
    correlation_threshold: float = CORRELATION_THRESHOLD
    max_correlation: float = MAX_CORRELATION
    waste_free: object = False
    persistent: object = False
    max_step: float | None = None
    min_step: float | None = None
    max_steps: int = 10_000
    init: object = "auto"
    init_kwargs: dict | None = None
    conditional_start: bool = True
    kernel_kwargs: dict | None = None
    backend: str | None = None
    compile_kwargs: dict | None = None
    mp_ctx: object = None
    executor: object = None
    memory_budget: float | None = None
    scale_shift: object = None
    path: str = "geometric"
    path_kwargs: dict | None = None
    reparameterize: object = "none"

    @property
    def constant_rate(self) -> bool:
        """CR-SMC: ``schedule="constant_rate"``."""
        return self.schedule.constant_rate

    @classmethod
    def from_kwargs(cls, kwargs: Mapping) -> SMCSettings:
        """The settings from ``sample_smc``'s ``**kernel_kwargs``, checked; a ``TypeError``
        names unknown keywords, a ``ValueError`` a bad value."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            raise TypeError(f"sample_smc got unexpected keyword arguments {unknown}")
        s = cls(**kwargs)
        s = replace(s, schedule=parse_schedule(s.schedule, SMC_SCHEDULES))
        cr = s.constant_rate
        if s.target_mcse is not None:
            if not (cr or s.schedule.adaptive):
                raise TypeError(
                    "target_mcse applies to the adaptive schedules ('ess', 'cess') and to "
                    "schedule='constant_rate' (CR-SMC); a fixed schedule has its own stages"
                )
            s = replace(s, target_mcse=check_target_mcse(s.target_mcse))
        resample = s.resample if s.resample is not None else ("ess" if cr else "always")
        kappa = s.resample_threshold
        kappa = kappa if kappa is not None else (0.9 if cr else 0.5)
        if resample not in ("always", "ess"):
            raise ValueError(f"resample must be 'always' or 'ess', got {resample!r}")
        if not (np.isfinite(kappa) and 0 < kappa <= 1):
            raise ValueError(f"resample_threshold must be in (0, 1], got {kappa!r}")
        waste_free = s.waste_free
        if waste_free is True:
            waste_free = WASTE_FREE_LENGTH
        elif waste_free is False or waste_free is None:
            waste_free = 0
        else:
            waste_free = check_int(waste_free, "waste_free", 2, "or waste_free=True (P = 10)")
        if s.n_mcmc_steps not in ("auto", "pymc"):
            check_int(s.n_mcmc_steps, "n_mcmc_steps", 0, "or n_mcmc_steps='auto'")
        idle = s.idle_mcmc_steps
        if not (idle is None or (isinstance(idle, str) and idle == "auto")):
            idle = check_int(idle, "idle_mcmc_steps", 0, "or idle_mcmc_steps='auto' (or None)")
        max_steps = check_int(s.max_steps, "max_steps", 1, "e.g. max_steps=10000")
        if not isinstance(s.conditional_start, bool | np.bool_):
            raise TypeError(
                f"conditional_start must be True or False, got {s.conditional_start!r}"
            )
        if cr:  # the rule's options, before anything is compiled
            ConstantRateSchedule(1.0, min_step=s.min_step or 0.0, max_step=s.max_step or 0.125)
        return replace(
            s,
            resample=resample,
            resample_threshold=float(kappa),
            waste_free=waste_free,
            max_steps=max_steps,
            idle_mcmc_steps=idle,
        )

    @property
    def default_ess(self) -> bool:
        """The ESS schedule at its default ``threshold`` and no ``n_steps``: a start that
        replaces the schedule by one stage must not override a schedule the user chose."""
        return bool(
            getattr(self.schedule, "name", self.schedule) == "ess"
            and self.threshold == 0.5
            and self.n_steps is None
        )

    @property
    def cr_sized(self) -> bool:
        """CR-SMC sizing its own run: ``schedule="constant_rate"`` without ``n_steps`` or
        ``delta``."""
        return bool(self.constant_rate and self.n_steps is None and is_auto(self.delta))

    def tries_conditional_start(self) -> bool:
        """Whether the run may take the conditional-Laplace start (on the geometric path
        without persistent sampling, which the caller checks): ``conditional_start`` and
        :attr:`default_ess` or :attr:`cr_sized`."""
        return bool(self.conditional_start and (self.default_ess or self.cr_sized))

    def resolved_idle_mcmc_steps(self, persistent) -> int | None:
        """Transitions of a stage ``τ < 1`` that did not resample (``None``: as
        ``n_mcmc_steps``). ``"auto"``: one when the move count is adaptive (``"auto"`` or
        ``"pymc"``) and resampling is ESS-triggered (``resample="ess"``, CR-SMC's default),
        outside waste-free and persistent runs; else ``None``."""
        idle = self.idle_mcmc_steps
        if not (isinstance(idle, str) and idle == "auto"):
            return idle
        adaptive = isinstance(self.n_mcmc_steps, str)
        if adaptive and self.resample == "ess" and not self.waste_free and not persistent:
            return 1
        return None

    def anneal_options(self, persistent=False, stages=None) -> AnnealOptions:
        """The annealing loop's options of a ``sample_smc`` run with these settings
        (``stages``: persistent sampling's strategy, else ``None``)."""
        return AnnealOptions.from_settings(
            n_mcmc_steps=self.n_mcmc_steps,
            max_stages=self.max_steps,
            resample=self.resample,
            threshold=self.resample_threshold,
            resampler=self.resampler,
            max_mcmc_steps=int(self.max_mcmc_steps),
            correlation_threshold=float(self.correlation_threshold),
            tune_from_weights=True,
            max_correlation=float(self.max_correlation),
            waste_free=self.waste_free,
            stages=stages,
            idle_mcmc_steps=self.resolved_idle_mcmc_steps(persistent),
        )
