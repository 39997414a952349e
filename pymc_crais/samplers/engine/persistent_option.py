"""``sample_smc``'s ``persistent=`` option: checks, and the core's stage strategy.

Persistent sampling itself is :mod:`pymc_crais.core.persistent`; this module turns the
user's argument into a :class:`~pymc_crais.core.persistent.PersistentSampling` whose pool
fits the run's ``memory_budget`` (shared by the chains, which may run in one process).
"""

from __future__ import annotations

import numbers

from ...core.persistent import PersistentSampling
from .memory import check_memory_budget

__all__ = ["check_persistent", "persistent_stages"]


def check_persistent(persistent, schedule, waste_free, path) -> int | str:
    """``persistent=`` as ``0`` (off), ``"all"`` (``True``) or a number ``L ≥ 2`` of kept
    populations (``schedule``: the parsed schedule argument, a
    :class:`~pymc_crais.samplers.engine.schedule_option.ScheduleArg`); errors name the
    argument and the fix."""
    if persistent is False or persistent is None:
        return 0
    if persistent is True:
        value = "all"
    elif isinstance(persistent, numbers.Integral) and persistent >= 2:
        value = int(persistent)
    else:
        raise ValueError(
            "persistent must be False, True (keep every population within the memory "
            f"budget) or a number of populations >= 2 (e.g. persistent=20), got {persistent!r}"
        )
    if schedule.name in ("cess", "constant_rate"):
        raise ValueError(
            f"persistent=True works with schedule='ess' (its pooled weights' ESS) or a fixed "
            f"schedule, not schedule={schedule.value!r}; use schedule='ess' or persistent=False"
        )
    if waste_free:
        raise ValueError(
            "persistent and waste_free are two ways of reusing particles and cannot be "
            "combined; pass one of them"
        )
    if path != "geometric":
        raise ValueError(
            f"persistent=True needs path='geometric' (power-mean alpha allowed), got "
            f"path={path!r}"
        )
    return value


def persistent_stages(persistent: int | str, setup) -> PersistentSampling:
    """The stage strategy of ``persistent`` for the run ``setup``: at most ``L``
    populations, and at most ``memory_budget / chains`` bytes of them per chain."""
    budget = check_memory_budget(setup.options.memory_budget) / max(1, setup.chains)
    return PersistentSampling(None if persistent == "all" else int(persistent), budget)
