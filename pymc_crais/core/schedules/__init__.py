"""Schedules: how τ goes from 0 to 1.

* :mod:`.fixed`: the :class:`Schedule` interface and the fixed schedules (linear, sigmoid,
  exponential, an array), re-exported here;
* :mod:`.adaptive`: ESS, CESS and constant-rate (CR-AIS) schedules, the next τ from the
  population;
* :mod:`.rate_reference`: for α ≠ 0, the constant-rate rule's statistics on a geometric
  pilot's pooled stages;
* :mod:`.thermodynamic`: schedules of equal thermodynamic length from a pilot's metric.
"""

from .fixed import (
    FIXED_SCHEDULES,
    FixedSchedule,
    Schedule,
    exponential_schedule,
    interpolate_schedule,
    linear_schedule,
    make_fixed_schedule,
    sigmoid_schedule,
    validate_schedule,
)

__all__ = [
    "FIXED_SCHEDULES",
    "FixedSchedule",
    "Schedule",
    "exponential_schedule",
    "interpolate_schedule",
    "linear_schedule",
    "make_fixed_schedule",
    "sigmoid_schedule",
    "validate_schedule",
]
