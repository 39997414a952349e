"""Run options shared by every sampler, and the argument checks they all use.

:class:`RunOptions` holds the arguments every public sampler takes (model, particles,
chains, kernel, ``init``, seed, backend, output); :func:`pymc_crais.samplers.engine.pipeline.prepare`
checks them once and turns them into a ready :class:`~pymc_crais.samplers.engine.pipeline.RunSetup`.
The checks of method-specific arguments that several samplers share (integers, the rate
``delta``) live here too, so each is written once; the schedule argument has its own module
(:mod:`pymc_crais.samplers.engine.schedule_option`).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, fields

import numpy as np

__all__ = [
    "RunOptions",
    "RunArguments",
    "check_int",
    "check_rate",
    "is_auto",
]


@dataclass(frozen=True)
class RunArguments:
    """The arguments that ``sample_ais``, ``sample_crais`` and ``sample_rts`` share, as the
    call gave or defaulted them (each sampler's signature is the one place its defaults
    are written): the common part of their settings objects (``AISSettings``,
    ``CRAISSettings``, ``RTSSettings``), which add their own fields. No defaults here."""

    draws: int
    alpha: float
    kernel: object
    chains: int | None
    cores: int | None
    random_seed: object
    progressbar: bool
    return_inferencedata: bool
    idata_kwargs: dict | None
    compile_kwargs: dict | None
    model: object
    init: object
    init_kwargs: dict | None
    n_mcmc_steps: object
    kernel_kwargs: dict | None
    scale_shift: float | str | None
    backend: str | None
    mp_ctx: object
    executor: object
    memory_budget: float | None


@dataclass(frozen=True)
class RunOptions:
    """The arguments every sampler shares (see :func:`pymc_crais.sample_ais` for each).

    ``n_mcmc_steps`` is the number of kernel transitions per stage or sweep (an integer
    ``>= 0``); a sampler with its own rule (``"auto"``) passes 0 here and handles it.
    ``per_level_kernel``: the kernel moves particles at every level of a ladder at once (RTS),
    which ``kernel="auto"`` takes into account on discrete models; ``resamples``: the sampler
    resamples its particles to every stage's target (SMC), where ``kernel="auto"`` on a
    continuous model is ``"hmc_final_imh"`` (independence moves at ``τ = 1``).
    ``reparameterize``: ``"none"`` or ``"noncentred"`` (see
    :mod:`pymc_crais.samplers.engine.noncentre`). ``mode_mixture``: whether ``init="auto"``
    may start at several modes found (:func:`~pymc_crais.samplers.engine.init_auto.mode_mixture`;
    RTS does not: its ladder was slower from that start, and timed out on a label-switching
    mixture).
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
    reparameterize: object = "none"
    mode_mixture: bool = True

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
