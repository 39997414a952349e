"""The ``schedule=`` argument of the annealing samplers (and ``sample_rts``'s ``ladder=``),
parsed once: :func:`parse_schedule` reads the user's value into a :class:`ScheduleArg` (what
kind of schedule it is), which builds the core's
:class:`~pymc_crais.core.schedules.Schedule` (:meth:`ScheduleArg.build`) or a ladder
(:meth:`ScheduleArg.ladder`). Every check of what a schedule argument is lives here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...chain_result import SamplerResult, schedule_from_result
from ...core.schedules import (
    FIXED_SCHEDULES,
    Schedule,
    interpolate_schedule,
    make_fixed_schedule,
    validate_schedule,
)
from ...core.schedules.adaptive import CESSSchedule, ESSSchedule
from .options import check_int

__all__ = [
    "ADAPTIVE_SCHEDULES",
    "AIS_SCHEDULES",
    "LADDERS",
    "SMC_SCHEDULES",
    "ScheduleArg",
    "parse_schedule",
]

ADAPTIVE_SCHEDULES = ("ess", "cess")
"""The ESS and CESS rules (``rho`` / ``threshold`` and the step bounds)."""
AIS_SCHEDULES = (*FIXED_SCHEDULES, *ADAPTIVE_SCHEDULES, "constant_rate", "thermodynamic")
SMC_SCHEDULES = (*FIXED_SCHEDULES, *ADAPTIVE_SCHEDULES, "constant_rate")
LADDERS = ("constant_rate", *FIXED_SCHEDULES)
"""The names :func:`pymc_crais.sample_ais`, :func:`pymc_crais.sample_smc` and
:func:`pymc_crais.sample_rts` (``ladder=``) accept."""


@dataclass(frozen=True, eq=False)
class ScheduleArg:
    """A parsed schedule argument.

    Attributes
    ----------
    kind : str
        ``"fixed"`` (a named fixed schedule), ``"ess"``, ``"cess"``, ``"constant_rate"``,
        ``"thermodynamic"``, ``"array"`` (τ values), ``"result"`` (a previous result, whose
        schedule is re-used) or ``"schedule"`` (a :class:`Schedule` object).
    name : str or None
        The lower-case name of a named schedule.
    value : object
        The argument as the user gave it (an array as float64).
    argument : str
        The argument's name, for messages.
    """

    kind: str
    name: str | None
    value: object
    argument: str = "schedule"

    @property
    def constant_rate(self) -> bool:
        """The constant-rate rule (CR-AIS, CR-SMC, the RTS ladder of a tuning run)."""
        return self.kind == "constant_rate"

    @property
    def adaptive(self) -> bool:
        """The ESS or CESS rule."""
        return self.kind in ADAPTIVE_SCHEDULES

    def build(self, n_steps, schedule_kwargs=None, rho=None, max_step=None, min_step=None) -> Schedule:
        """The schedule: a named fixed one of ``n_steps`` steps with ``schedule_kwargs``;
        the ESS/CESS rule with target ratio ``rho`` (default 0.9) and step bounds; the τ of
        an array or of a previous result; a ``Schedule`` as given. The constant-rate and
        thermodynamic schedules need a pilot: their samplers build them."""
        kw = dict(schedule_kwargs or {})
        if self.kind == "schedule":
            return self.value
        if self.adaptive or self.kind == "thermodynamic":
            if kw:
                raise TypeError("schedule_kwargs only apply to linear/sigmoid/exponential schedules")
            if self.kind == "thermodynamic":
                raise ValueError("schedule='thermodynamic' is built from a pilot's metric")
            cls = ESSSchedule if self.kind == "ess" else CESSSchedule
            return cls(0.9 if rho is None else rho, max_step=max_step, min_step=min_step)
        if self.kind == "fixed":
            n = check_int(n_steps, "n_steps", 1, "e.g. n_steps=200")
            return make_fixed_schedule(self.name, n, **kw)
        if self.kind == "result":
            if kw:
                raise TypeError("schedule_kwargs only apply to a named schedule")
            return make_fixed_schedule(schedule_from_result(self.value))
        if self.kind == "array":
            return make_fixed_schedule(self.value, **kw)
        raise ValueError(f"{self.argument}={self.name!r} is built by its sampler, after a pilot")

    def ladder(self, n_levels: int, ladder_kwargs=None) -> tuple[np.ndarray | None, str]:
        """The ladder of ``n_levels`` temperatures as an array and its name (``None`` for
        ``"constant_rate"``, built after the set-up from a tuning run; an array keeps its
        own length; a previous result's schedule is interpolated to ``n_levels``)."""
        kw = dict(ladder_kwargs or {})
        if self.kind == "constant_rate":
            return None, self.name
        if self.kind == "fixed":
            return make_fixed_schedule(self.name, n_levels - 1, **kw).taus, self.name
        if kw:
            raise TypeError("ladder_kwargs only apply to a named ladder")
        if self.kind == "result":
            return interpolate_schedule(schedule_from_result(self.value), n_levels - 1), "from_result"
        if self.kind == "array":
            return validate_schedule(self.value), "array"
        raise ValueError(
            f"ladder={self.value!r} is not understood; pass a name, an array or a previous result"
        )


def parse_schedule(schedule, names=AIS_SCHEDULES, argument: str = "schedule") -> ScheduleArg:
    """Read a schedule argument: one of ``names`` (any case), a :class:`Schedule`, a previous
    result (``xarray.DataTree`` or :class:`SamplerResult`) or an array of τ; a
    ``ValueError`` naming the argument and what it accepts otherwise.

    Parameters
    ----------
    schedule : str, Schedule, result or array_like
    names : sequence of str
        The names the sampler accepts.
    argument : str
        The argument's name (``"schedule"``, ``"ladder"``).

    Returns
    -------
    ScheduleArg
    """
    if isinstance(schedule, Schedule):
        return ScheduleArg("schedule", None, schedule, argument)
    if isinstance(schedule, str):
        key = schedule.lower()
        if key not in names:
            raise ValueError(
                f"{argument}={schedule!r} is unknown; choose one of {sorted(names)}, or pass an "
                "increasing array of tau from 0 to 1 or a previous result"
            )
        return ScheduleArg("fixed" if key in FIXED_SCHEDULES else key, key, schedule, argument)
    if hasattr(schedule, "children") or isinstance(schedule, SamplerResult):
        return ScheduleArg("result", None, schedule, argument)
    if hasattr(schedule, "__array__") or isinstance(schedule, list | tuple):
        return ScheduleArg("array", None, np.asarray(schedule, dtype=np.float64), argument)
    raise ValueError(
        f"{argument}={schedule!r} is not understood; pass one of {sorted(names)}, an increasing "
        "array of tau from 0 to 1, or a previous result"
    )
