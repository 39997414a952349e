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

SMC (``sample_smc``, which resamples its particles to each stage's target) makes one more
choice once the automatic start (``init="auto"``) has looked at the posterior: where the
Laplace fit found **no interior mode** (a Hessian with non-concave directions: a funnel, as
in a centred hierarchical model, or a ridge) it moves the particles with independence
Metropolis, and with HMC from the first transition that accepts under 2.5 % of its
proposals (``"imh_then_hmc"``, :class:`~pymc_crais.core.kernels.IMHThenHMC`). HMC's step
size and metric, fitted to the whole population, do not suit a funnel's neck and its mouth
at once; an independence proposal fitted to the resampled population jumps between them,
as long as it is close enough to the target to be accepted. Measured on the three suite
cases with this property (``hier_centered``, ``eight_schools_centered``, ``bimodal_square``;
seeds 11–20, ``benchmarks/funnel_kernel.py``, where no transition falls under the bound and
the runs are IMH's bit for bit): RMS error 0.064 against HMC's 0.107 on the centred funnel
(``pm.sample_smc``: 0.091), 0.020 against 0.016 and 0.009 against 0.020 on the other two,
with 2.7–5.5× fewer model evaluations; the bimodal square's right runs are no longer
flagged. On centred funnels with 30 and 60 groups outside the suite IMH alone accepted
under 1 % and was off by up to 1.7 nat; there the fallback gives errors near HMC's (RMS
0.75 against 0.63, IMH alone 1.25), every run of each kernel flagged (docs/validation.md,
"Funnels: independence moves in SMC").
AIS and CR-AIS keep HMC: without resampling, independence moves did not help them there.

On every other continuous model SMC's ``"auto"`` is ``"hmc_final_imh"``
(:class:`~pymc_crais.core.kernels.FinalIMH`): HMC below ``τ = 1``, and at ``τ = 1`` (the
last stage, whose moves come after SMC's ``log Z`` is complete and change only the
posterior draws) cross-fitted independence Metropolis until a transition accepts under
29 % of its proposals, HMC after that. ``log Z`` is HMC's to the bit (all 33 suite cases);
on the Pima-sized regressions of the suite the sampling call takes 40–60 % of HMC's time
(``pima_sd5`` 1.63 → 0.70 s, 80 k → 32 k evaluations), at d ≥ 31 up to 13 % more; the
posterior draws agree with HMC's as closely as two HMC runs with different seeds do
(``benchmarks/final_stage_imh.py``, docs/benchmarks.md, "SMC's last-stage moves").

What was chosen, and why, goes into the output's attributes.
"""

from __future__ import annotations

from .compile import ParameterLayout

__all__ = [
    "AUTO",
    "CONTINUOUS_DEFAULT",
    "DISCRETE_DEFAULT",
    "DISCRETE_DEFAULT_PER_LEVEL",
    "FINAL_STAGE_DEFAULT",
    "FUNNEL_DEFAULT",
    "kernel_after_start",
    "resolve_kernel",
]

AUTO = "auto"
CONTINUOUS_DEFAULT = "hmc"
DISCRETE_DEFAULT = "imh"
DISCRETE_DEFAULT_PER_LEVEL = "rwmh"
FUNNEL_DEFAULT = "imh_then_hmc"
FINAL_STAGE_DEFAULT = "hmc_final_imh"


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


def kernel_after_start(
    kernel_attrs: dict, kernel_kwargs: dict | None, start_attrs: dict, layout: ParameterLayout,
    resamples: bool,
):
    """The kernel ``"auto"`` turns to once the start has looked at the posterior, if any.

    Parameters
    ----------
    kernel_attrs : dict
        What :func:`resolve_kernel` returned with the kernel (empty unless ``"auto"`` was
        resolved).
    kernel_kwargs : dict or None
        The user's kernel options (with options the kernel ``"auto"`` chose stays).
    start_attrs : dict
        The start's attributes (``init`` and ``laplace_n_nonconcave``, from the Laplace fit
        of ``init="auto"``; other starts keep the kernel).
    layout : ParameterLayout
    resamples : bool
        The sampler resamples its particles to every stage's target (SMC).

    Returns
    -------
    kernel : str or None
        ``None``: keep the kernel already chosen (samplers that do not resample, user
        options, discrete models).
    attrs : dict
        The attributes recording the new choice (empty with ``None``).
    """
    if not (kernel_attrs and resamples) or kernel_kwargs or layout.has_discrete:
        return None, {}
    n = int(start_attrs.get("laplace_n_nonconcave", 0) or 0)
    funnel = start_attrs.get("init") == "auto" and n > 0  # measured with the automatic start
    if not funnel:
        reason = (
            f"all free variables are continuous: {FINAL_STAGE_DEFAULT!r}, HMC and, at the "
            "target (after log Z is complete), independence proposals while they are accepted"
        )
        return FINAL_STAGE_DEFAULT, {"kernel_requested": AUTO, "kernel_reason": reason}
    reason = (
        f"the Laplace fit found no interior mode ({n} non-concave direction(s) of the Hessian: "
        f"a funnel or a ridge): {FUNNEL_DEFAULT!r}, an independence proposal fitted to the "
        "resampled population at every stage"
    )
    return FUNNEL_DEFAULT, {"kernel_requested": AUTO, "kernel_reason": reason}
