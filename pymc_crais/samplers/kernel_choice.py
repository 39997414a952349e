"""The default kernel, ``kernel="auto"``: HMC where the model allows it, a gradient-free
kernel where it has discrete variables.

HMC needs gradients, and a model with discrete free variables (a switchpoint, a count) has
none: the engine works with the continuous relaxation ``p(round(θ))``, which is piecewise
constant in the discrete coordinates. ``pm.sample_smc()`` runs on such models with its
default independence Metropolis kernel; ``kernel="auto"`` does the same, so that a call with
no options works on every model:

* annealing (SMC, AIS, CR-AIS: one temperature at a time) takes independence Metropolis,
  its Gaussian proposal refitted to the population at every stage;
* tempered sampling (RTS: particles at every level of the ladder at once) takes random-walk
  Metropolis, whose scale is adapted per level; IMH has one proposal for all levels, fitted
  to the whole population, and missed the exact ``log Z`` of both discrete test models by
  6 and 50 MCSE (benchmarks/bench_discrete_kernel.py, docs/validation.md).

What was chosen, and why, goes into the output's attributes.
"""

from __future__ import annotations

from .compile import ParameterLayout

__all__ = [
    "AUTO",
    "CONTINUOUS_DEFAULT",
    "DISCRETE_DEFAULT",
    "DISCRETE_DEFAULT_PER_LEVEL",
    "resolve_kernel",
]

AUTO = "auto"
CONTINUOUS_DEFAULT = "hmc"
DISCRETE_DEFAULT = "imh"
DISCRETE_DEFAULT_PER_LEVEL = "rwmh"


def resolve_kernel(
    kernel, kernel_kwargs: dict | None, layout: ParameterLayout, per_level: bool = False
):
    """The kernel to build for ``kernel`` on a model with ``layout``, and the attributes that
    record the choice.

    Parameters
    ----------
    kernel : str or MutationKernel
        ``"auto"`` (resolved here), a kernel name or a kernel object (returned as given).
    kernel_kwargs : dict or None
        Options of the kernel; with ``"auto"`` they must fit the kernel it resolves to.
    layout : ParameterLayout
        The model's free variables (which of them are discrete).
    per_level : bool, default False
        The kernel moves particles at all levels of a ladder at once (RTS).

    Returns
    -------
    kernel : str or MutationKernel
    attrs : dict
        ``{"kernel_requested": "auto", "kernel_reason": ...}`` when ``"auto"`` was resolved,
        else ``{}``.
    """
    if not (isinstance(kernel, str) and kernel.lower() == AUTO):
        return kernel, {}
    if layout.has_discrete:
        name = DISCRETE_DEFAULT_PER_LEVEL if per_level else DISCRETE_DEFAULT
        reason = f"discrete free variables {layout.discrete_names} have no gradient: " + (
            f"{name!r} (gradient-free, its scale adapted per level)"
            if per_level
            else f"{name!r} (gradient-free, as pm.sample_smc's default)"
        )
    else:
        name = CONTINUOUS_DEFAULT
        reason = f"all free variables are continuous: {name!r}"
    if kernel_kwargs:
        from ..core.kernels import make_kernel

        try:
            make_kernel(name, **dict(kernel_kwargs))
        except TypeError as err:
            raise TypeError(
                f"kernel='auto' chose {name!r} ({reason}), which does not take kernel_kwargs "
                f"{sorted(kernel_kwargs)} ({err}); name the kernel, e.g. kernel={name!r} with "
                "its own options"
            ) from None
    return name, {"kernel_requested": AUTO, "kernel_reason": reason}
