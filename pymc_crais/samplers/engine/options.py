"""Run options shared by every sampler, and the argument checks they all use.

:class:`RunOptions` holds the arguments every public sampler takes (model, particles,
chains, kernel, ``init``, seed, backend, output); :func:`pymc_crais.samplers.engine.pipeline.prepare`
checks them once and turns them into a ready :class:`~pymc_crais.samplers.engine.pipeline.RunSetup`.
The checks of method-specific arguments that several samplers share (integers, the rate
``delta``, a schedule argument) live here too, so each is written once.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, fields

import numpy as np

from ...chain_result import SamplerResult, schedule_from_result
from ...core.schedules import FIXED_SCHEDULES, Schedule, make_fixed_schedule
from ...core.schedules.adaptive import CESSSchedule, ESSSchedule

__all__ = [
    "ADAPTIVE_SCHEDULES",
    "RunOptions",
    "check_int",
    "check_rate",
    "is_auto",
    "resolve_schedule",
]

ADAPTIVE_SCHEDULES = ("ess", "cess")


@dataclass(frozen=True)
class RunOptions:
    """The arguments every sampler shares (see :func:`pymc_crais.sample_ais` for each).

    ``n_mcmc_steps`` is the number of kernel transitions per stage or sweep (an integer
    ``>= 0``); a sampler with its own rule (``"auto"``) passes 0 here and handles it.
    ``per_level_kernel``: the kernel moves particles at every level of a ladder at once (RTS),
    which ``kernel="auto"`` takes into account on discrete models; ``resamples``: the sampler
    resamples its particles to every stage's target (SMC), where ``kernel="auto"`` on a
    continuous model is ``"hmc_final_imh"`` (independence moves at ``τ = 1``).
    """

    model: object = None
    draws: int = 1000
    chains: int | None = None
    cores: int | None = None
    kernel: object = "auto"
    kernel_kwargs: dict | None = None
    init: object = "auto"
    init_kwargs: dict | None = None
    random_seed: object = None
    backend: str | None = None
    compile_kwargs: dict | None = None
    idata_kwargs: dict | None = None
    n_mcmc_steps: int = 1
    progressbar: bool = True
    return_inferencedata: bool = True
    mp_ctx: object = None
    executor: object = None
    memory_budget: float | None = None
    per_level_kernel: bool = False
    resamples: bool = False

    @classmethod
    def from_settings(cls, settings, **overrides) -> RunOptions:
        """The options among the attributes of a sampler's settings object (a dataclass whose
        field names are the sampler's parameters), then ``overrides``."""
        names = {f.name for f in fields(cls)}
        own = {f.name: getattr(settings, f.name) for f in fields(settings) if f.name in names}
        return cls(**{**own, **overrides})


def check_int(value, name: str, minimum: int, fix: str) -> int:
    """``value`` as an ``int``, or a ``ValueError`` naming ``name`` and the ``fix``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}; {fix}")
    return int(value)


def is_auto(value) -> bool:
    """Whether an argument is the string ``"auto"``."""
    return isinstance(value, str) and value == "auto"


def check_rate(delta, name: str = "delta"):
    """The constant-rate ``δ``: ``"auto"`` or a finite positive number (as a float)."""
    if is_auto(delta):
        return delta
    if (
        isinstance(delta, bool)
        or not isinstance(delta, numbers.Real)
        or not (np.isfinite(delta) and delta > 0)
    ):
        raise ValueError(f"{name} must be a positive number or 'auto', got {delta!r}")
    return float(delta)


def resolve_schedule(schedule, n_steps, schedule_kwargs, rho, max_step, min_step) -> Schedule:
    """The ``schedule=`` argument of the annealing samplers as a :class:`Schedule`.

    A name (fixed: ``n_steps`` steps and ``schedule_kwargs``; ``"ess"``/``"cess"``: target
    ratio ``rho``, default 0.9, and step bounds), an increasing array of τ, a previous result
    (its schedule) or a ``Schedule``.
    """
    kw = dict(schedule_kwargs or {})
    if isinstance(schedule, Schedule):
        return schedule
    if isinstance(schedule, str):
        key = schedule.lower()
        if key in ADAPTIVE_SCHEDULES:
            if kw:
                raise TypeError(
                    "schedule_kwargs only apply to linear/sigmoid/exponential schedules"
                )
            cls = ESSSchedule if key == "ess" else CESSSchedule
            return cls(0.9 if rho is None else rho, max_step=max_step, min_step=min_step)
        if key in FIXED_SCHEDULES:
            return make_fixed_schedule(
                key, check_int(n_steps, "n_steps", 1, "e.g. n_steps=200"), **kw
            )
        raise ValueError(
            f"schedule={schedule!r} is unknown; choose one of {sorted(FIXED_SCHEDULES)}, 'ess', "
            "'cess', 'constant_rate', or pass an increasing array of tau from 0 to 1 or a "
            "previous result"
        )
    if hasattr(schedule, "children") or isinstance(schedule, SamplerResult):
        return make_fixed_schedule(schedule_from_result(schedule))
    if hasattr(schedule, "__array__") or isinstance(schedule, list | tuple):
        taus = np.asarray(schedule, dtype=np.float64)
        return make_fixed_schedule(taus, **kw)
    raise ValueError(
        f"schedule={schedule!r} is not understood; pass 'linear', 'sigmoid', 'exponential', "
        "'ess', 'cess', 'constant_rate', an increasing array of tau from 0 to 1, or a previous "
        "result"
    )
