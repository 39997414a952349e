"""Warning classes of pymc_crais, so users (and the package itself) filter by category.

A flat list of classes, importing nothing: ``warnings.simplefilter("ignore",
pymc_crais.warnings.MaxStepsWarning)`` silences one kind of warning and no other. Each class
subclasses the built-in category it had before it had its own class (``RuntimeWarning`` or
``UserWarning``), so existing filters keep working.
"""

from __future__ import annotations

__all__ = ["MaxStepsWarning", "RTSInitialLoopWarning"]


class MaxStepsWarning(RuntimeWarning):
    """An adaptive schedule reached ``max_steps`` before τ = 1, so its last step jumped to
    τ = 1 and the estimate may be poor (``sample_stats.hit_max_steps``). Increase
    ``max_steps``, or loosen the schedule (a larger ``delta`` or a smaller ``rho``)."""


class RTSInitialLoopWarning(RuntimeWarning):
    """The initial loop of tempered sampling (RTS) hit ``max_init_rounds`` before its
    stopping rule held: the per-level ``log Z_k`` guesses are still off, so temperatures may
    mix poorly. Increase ``max_init_rounds`` or ``n_init_sweeps``, or use more
    temperatures."""
