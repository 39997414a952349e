"""Annealing schedules: which τ comes next.

A :class:`Schedule` answers ``next_tau(stage, tau, state, log_weights, path)``; fixed
schedules ignore the population, adaptive ones (ESS, CESS, constant rate) solve on it.
The engine applies exactly the increment ``path.log_increment(tau, tau_next, Δ)`` that an
adaptive schedule solved on.
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod

import numpy as np

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


class Schedule(ABC):
    """Interface of a schedule."""

    name: str = "schedule"

    @abstractmethod
    def next_tau(self, stage: int, tau: float, state, log_weights, path) -> float:
        """The τ of stage ``stage + 1`` given stage ``stage`` is at ``tau``."""

    def describe(self) -> dict:
        """Settings worth recording in the output's attributes."""
        return {"schedule": self.name}


def _check_n_steps(n_steps) -> int:
    ok = isinstance(n_steps, numbers.Real) and not isinstance(n_steps, bool)
    if not ok or not np.isfinite(n_steps) or int(n_steps) != n_steps or n_steps < 1:
        raise ValueError(f"n_steps must be a positive integer, got {n_steps!r}")
    return int(n_steps)


def linear_schedule(n_steps: int) -> np.ndarray:
    """``τ_k = k / M`` for ``k = 0..M``."""
    m = _check_n_steps(n_steps)
    return np.linspace(0.0, 1.0, m + 1)


def sigmoid_schedule(n_steps: int, scale: float = 10.0) -> np.ndarray:
    """Sigmoidal schedule ``(σ(s(k/M − ½)) − σ(−s/2)) / (σ(s/2) − σ(−s/2))``.

    Parameters
    ----------
    n_steps : int
        ``M``, the number of annealing steps.
    scale : float, default 10.0
        Steepness ``s``; large values crowd the steps at both ends.
    """
    m = _check_n_steps(n_steps)
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"sigmoid scale must be positive, got {scale}")

    def sig(v):
        return 1.0 / (1.0 + np.exp(-v))

    s = sig(scale * (np.arange(m + 1) / m - 0.5))
    taus = (s - sig(-scale / 2)) / (sig(scale / 2) - sig(-scale / 2))
    taus[0], taus[-1] = 0.0, 1.0
    return taus


def exponential_schedule(n_steps: int, tau_min: float = 1e-4) -> np.ndarray:
    """Geometric spacing: ``τ_0 = 0`` and ``τ_1 = tau_min, …, τ_M = 1`` evenly in ``log τ``.

    Parameters
    ----------
    n_steps : int
        ``M``, the number of annealing steps.
    tau_min : float, default 1e-4
        The first positive τ. Suits priors far wider than the posterior, where the first
        steps must be tiny.
    """
    m = _check_n_steps(n_steps)
    if not 0.0 < tau_min < 1.0:
        raise ValueError(f"tau_min must be in (0, 1), got {tau_min}")
    if m == 1:
        return np.array([0.0, 1.0])
    taus = np.concatenate([[0.0], np.geomspace(tau_min, 1.0, m)])
    taus[-1] = 1.0
    return taus


FIXED_SCHEDULES = {
    "linear": linear_schedule,
    "sigmoid": sigmoid_schedule,
    "exponential": exponential_schedule,
}


def validate_schedule(taus) -> np.ndarray:
    """Check a user schedule: finite, strictly increasing, from exactly 0 to exactly 1.

    Parameters
    ----------
    taus : array_like
        Candidate schedule.

    Returns
    -------
    numpy.ndarray
        The schedule as float64.
    """
    t = np.asarray(taus, dtype=np.float64)
    if t.ndim != 1 or t.size < 2:
        raise ValueError("schedule array must be 1-D with at least two entries (0 and 1)")
    if not np.all(np.isfinite(t)):
        raise ValueError("schedule array must be finite")
    if t[0] != 0.0 or t[-1] != 1.0:
        raise ValueError(
            f"schedule array must start at 0 and end at 1, got {t[0]!r} ... {t[-1]!r}; "
            "prepend 0.0 / append 1.0"
        )
    if np.any(np.diff(t) <= 0):
        k = int(np.argmax(np.diff(t) <= 0))
        raise ValueError(
            f"schedule array must be strictly increasing; entry {k + 1} ({t[k + 1]!r}) "
            f"does not exceed entry {k} ({t[k]!r})"
        )
    return t


class FixedSchedule(Schedule):
    """A schedule given in advance as an array ``0 = τ_0 < … < τ_M = 1``."""

    def __init__(self, taus, name: str = "array", **settings):
        self.taus = validate_schedule(taus)
        self.name = name
        self.settings = settings

    @property
    def n_steps(self) -> int:
        """Number of annealing steps ``M``."""
        return self.taus.size - 1

    def next_tau(self, stage, tau, state=None, log_weights=None, path=None) -> float:
        return float(self.taus[stage + 1])

    def describe(self) -> dict:
        return {"schedule": self.name, "n_steps": self.n_steps, **self.settings}


def make_fixed_schedule(schedule, n_steps: int | None = None, **kwargs) -> FixedSchedule:
    """Build a :class:`FixedSchedule` from a name or an array.

    Parameters
    ----------
    schedule : str or array_like
        ``"linear"``, ``"sigmoid"``, ``"exponential"``, or an increasing array from 0 to 1.
    n_steps : int, optional
        Number of steps for a named schedule (ignored for an array).
    **kwargs
        Options of the named schedule (``scale`` for sigmoid, ``tau_min`` for exponential).
    """
    if isinstance(schedule, str):
        key = schedule.lower()
        if key not in FIXED_SCHEDULES:
            raise ValueError(
                f"schedule={schedule!r} is unknown; choose one of {sorted(FIXED_SCHEDULES)} "
                "or pass an increasing array of τ values from 0 to 1"
            )
        if n_steps is None:
            raise ValueError(f"schedule={schedule!r} needs n_steps")
        try:
            taus = FIXED_SCHEDULES[key](n_steps, **kwargs)
        except TypeError as err:
            raise TypeError(f"bad schedule_kwargs for schedule={key!r}: {err}") from None
        return FixedSchedule(taus, name=key, **kwargs)
    if kwargs:
        raise TypeError("schedule_kwargs only apply to a named schedule")
    return FixedSchedule(schedule, name="array")


def interpolate_schedule(taus, n_steps: int) -> np.ndarray:
    """Resample a schedule to ``n_steps`` steps, keeping its shape.

    The schedule is read as a function ``τ(s)`` of the relative position ``s = i / M`` and
    evaluated linearly at ``s = k / n_steps`` (CR-AIS's shape is stable across δ, so a short
    tuning run fixes a long final schedule).

    Parameters
    ----------
    taus : array_like
        A valid schedule ``0 = τ_0 < … < τ_M = 1``.
    n_steps : int
        Number of steps of the result.

    Returns
    -------
    numpy.ndarray
        ``n_steps + 1`` values from exactly 0 to exactly 1, strictly increasing.
    """
    t = validate_schedule(taus)
    m = _check_n_steps(n_steps)
    s_old = np.linspace(0.0, 1.0, t.size)
    out = np.interp(np.linspace(0.0, 1.0, m + 1), s_old, t)
    out[0], out[-1] = 0.0, 1.0
    return validate_schedule(out)
