"""The package's warning classes, a flat list importing nothing: filter them by category.

``UnreliableEvidenceWarning`` is the one to watch: a run raises it, with what to do, when
its own diagnostics show that its ``log Z`` or its error bar cannot be trusted
(:func:`pymc_crais.diagnose` prints the details). Silence one kind and no other with, e.g.,
``warnings.filterwarnings("ignore", category=pmc.UnreliableEvidenceWarning)``. Each class
subclasses the built-in category it had before it had its own class (``RuntimeWarning``), so
existing filters keep working. :func:`user_stacklevel` gives every warning of the package
the ``stacklevel`` of the user's call.
"""

from __future__ import annotations

__all__ = [
    "ChainDisagreementWarning",
    "MaxStepsWarning",
    "PathFallbackWarning",
    "RTSInitialLoopWarning",
    "RenamedWarning",
    "UnreliableEvidenceWarning",
    "renamed_argument",
    "renamed_property",
    "warn_renamed",
]


def user_stacklevel() -> int:
    """The ``stacklevel`` for a ``warnings.warn`` call in the package that points at the
    first frame outside it (the user's call), however deep the call chain is: pass
    ``stacklevel=user_stacklevel()``."""
    import sys

    package = __name__.split(".", 1)[0]
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == package:
        frame, level = frame.f_back, level + 1
    return level


class UnreliableEvidenceWarning(RuntimeWarning):
    """The estimate of ``log Z`` or its Monte Carlo error cannot be trusted.

    Raised by the samplers when a diagnostic of the run fails (collapsed SMC genealogy,
    heavy-tailed weights with Pareto k̂ > 0.7, moves that leave the particles where they
    were, a poor Laplace start, ``max_steps`` reached, chains that disagree beyond their
    errors). The message says which and what to do; :func:`pymc_crais.diagnose` gives the
    full report and ``sample_stats`` stores the per-chain values.
    """


class ChainDisagreementWarning(UnreliableEvidenceWarning):
    """The chains' ``log Z`` estimates disagree by more than their reported errors allow.

    A subclass of :class:`UnreliableEvidenceWarning`, raised by
    :func:`pymc_crais.log_marginal_likelihood` (and counted by :func:`pymc_crais.diagnose`)
    when the chi-square statistic of the chains' spread against their within-chain errors
    has a p-value below 0.001, or the chains span more than 2 nats and more than 4 MCSE.
    """


class MaxStepsWarning(RuntimeWarning):
    """An adaptive schedule reached ``max_steps`` before τ = 1, so its last step jumped to
    τ = 1 and the estimate may be poor (``sample_stats.hit_max_steps``). Increase
    ``max_steps``, or loosen the schedule (a larger ``delta`` or a smaller ``rho``)."""


class RTSInitialLoopWarning(RuntimeWarning):
    """The initial loop of tempered sampling (RTS) hit ``max_init_rounds`` before its
    stopping rule held: the per-level ``log Z_k`` guesses are still off, so temperatures may
    mix poorly. Increase ``max_init_rounds`` or ``n_init_sweeps``, or use more
    temperatures."""


class PathFallbackWarning(RuntimeWarning):
    """``path="moment_averaging"`` annealed along the geometric path instead: the Laplace
    fit it needs is not a usable Gaussian of the posterior (no interior mode, several modes
    found, or ``init="auto"`` rejected the fit). The reason is in the attribute
    ``path_fallback_reason``."""


class RenamedWarning(FutureWarning):
    """A name of the package was renamed so that each name means one thing (e.g. the
    transitions of a stage are ``n_transitions``, not ``n_steps``, which counts annealing
    steps; docs/architecture.md, "One name, one meaning"). The old name still works, with
    this warning, and will be removed."""


STEPS_COUNT_STAGES = "n_steps and max_steps count annealing steps only"
"""Why the transition and length counts were renamed (the default reason)."""


def warn_renamed(old: str, new: str, why: str = STEPS_COUNT_STAGES) -> None:
    """Warn (:class:`RenamedWarning`) that ``old`` was used, and is now ``new`` (``why``)."""
    import warnings

    warnings.warn(
        f"{old} was renamed {new} ({why}); use {new}",
        RenamedWarning,
        stacklevel=user_stacklevel(),
    )


def renamed_argument(
    where: str, old: str, new: str, value, extra: dict, why: str = STEPS_COUNT_STAGES
):
    """``value`` (the argument ``new`` of ``where``), or the value of its old name ``old``
    among ``extra`` (the function's ``**`` keywords) with a :class:`RenamedWarning`; a
    ``TypeError`` for any other keyword in ``extra``."""
    unknown = sorted(set(extra) - {old})
    if unknown:
        raise TypeError(f"{where} got unexpected keyword arguments {unknown}")
    if old in extra:
        warn_renamed(f"{where}({old}=...)", f"{where}({new}=...)", why)
        return extra[old]
    return value


def renamed_property(new: str, old: str) -> property:
    """A read-only property for the old name ``old`` (``"Class.name"``) of the attribute
    ``new``: it warns (:class:`RenamedWarning`) and returns ``new``'s value."""

    def get(self):
        warn_renamed(old, f"{old.rsplit('.', 1)[0]}.{new}")
        return getattr(self, new)

    return property(get, doc=f"Old name of ``{new}`` (a :class:`RenamedWarning`).")
