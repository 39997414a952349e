"""The settings of tempered sampling (:class:`RTSOptions`), read by every phase
(:mod:`.run`, :mod:`.warmup`, :mod:`.final`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["WARM_STARTS", "RTSOptions"]

WARM_STARTS = ("ais", None)


@dataclass(frozen=True)
class RTSOptions:
    """Settings of :func:`rts` (checked on construction; see :func:`rts` for their meaning).

    Attributes
    ----------
    n_sweeps : int, default 500
    n_init_sweeps : int, default 50
    max_init_rounds : int, default 20
    tol : float, default 0.1
    level_prior : array_like, optional
    warm_start : {"ais", None}, default "ais"
    n_mcmc_steps : int, default 1
    adapt_gain : float, default 0.1
    n_groups : int, default 20
    n_snapshots : int, default 20
    restart_levels : {"conditional", "prior"}, default "conditional"
    init_burn : float, default 0.5
    """

    n_sweeps: int = 500
    n_init_sweeps: int = 50
    max_init_rounds: int = 20
    tol: float = 0.1
    level_prior: object = None
    warm_start: str | None = "ais"
    n_mcmc_steps: int = 1
    adapt_gain: float = 0.1
    n_groups: int = 20
    n_snapshots: int = 20
    restart_levels: str = "conditional"
    init_burn: float = 0.5

    def __post_init__(self):
        for name, lo in (
            ("n_sweeps", 1),
            ("n_init_sweeps", 1),
            ("max_init_rounds", 0),
            ("n_mcmc_steps", 1),
            ("n_groups", 2),
            ("n_snapshots", 1),
        ):
            val = getattr(self, name)
            if isinstance(val, bool) or int(val) != val or val < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {val!r}")
        if not (np.isfinite(self.tol) and self.tol > 0):
            raise ValueError(f"tol must be positive, got {self.tol!r}; the paper uses 0.1")
        if self.warm_start not in WARM_STARTS:
            raise ValueError(f"warm_start must be 'ais' or None, got {self.warm_start!r}")
        if self.restart_levels not in ("prior", "conditional"):
            raise ValueError(
                f"restart_levels must be 'prior' or 'conditional', got {self.restart_levels!r}"
            )
        if not 0.0 <= self.init_burn < 1.0:
            raise ValueError(f"init_burn must be in [0, 1), got {self.init_burn!r}")

    def level_probabilities(self, K: int) -> np.ndarray:
        """The level prior ``r`` (normalized; uniform by default)."""
        if self.level_prior is None:
            return np.full(K, 1.0 / K)
        r = np.asarray(self.level_prior, dtype=np.float64)
        if r.shape != (K,) or not np.all(np.isfinite(r)) or np.any(r <= 0):
            raise ValueError(f"level_prior must be {K} positive finite numbers (one per level)")
        return r / r.sum()
