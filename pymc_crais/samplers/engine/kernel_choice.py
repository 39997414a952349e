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
  6 and 50 MCSE (benchmarks/bench_discrete_kernel.py, benchmarks/reports/validation.md).

SMC (``sample_smc``, which resamples its particles to each stage's target) takes, on every
continuous model, ``"hmc_final_imh"`` (:class:`~pymc_crais.core.kernels.FinalIMH`): HMC
below ``τ = 1``, and at ``τ = 1`` (the last stage, whose moves come after SMC's ``log Z`` is
complete and change only the posterior draws) cross-fitted independence Metropolis until a
transition accepts under 29 % of its proposals, HMC after that. ``log Z`` is HMC's to the
bit (all 33 suite cases); on the Pima-sized regressions of the suite the sampling call
takes 40–60 % of HMC's time (``pima_sd5`` 1.63 → 0.70 s, 80 k → 32 k evaluations), at
d ≥ 31 up to 13 % more; the posterior draws agree with HMC's as closely as two HMC runs
with different seeds do (``benchmarks/final_stage_imh.py``, benchmarks/reports/benchmarks.md, "SMC's
last-stage moves").

CR-AIS's run of one step (``n_steps="auto"`` when the start's weights meet the target:
importance sampling from ``q0``, then moves at ``τ = 1``, all after ``log Z`` is complete)
is SMC's one stage, and takes the same kernel in place of an automatic HMC
(:func:`one_step_kernel`); its annealed runs keep HMC (no resampling).

That includes funnels (a centred hierarchical model, where the Laplace fit of
``init="auto"`` finds no interior mode). While the batched log-density still checked each
parameter condition over all particles of a call at once (one particle whose scale
underflowed to 0 gave every particle ``-inf``, and HMC rejected every move of such a
transition; fixed by :func:`~pymc_crais.samplers.engine.rewrites.checks_per_particle`), SMC took
independence moves there (``"imh_then_hmc"``, still available by name). With that fixed,
HMC is the more accurate of the two on the suite's three such cases (seeds 11–20,
``benchmarks/funnel_kernel.py``): on the centred funnel RMS error 0.040 and no run beyond
0.1 nat or warned, against 0.064, 2 runs beyond 0.1 nat and 6 warned for independence
moves (``pm.sample_smc``: 0.091, 3 runs beyond 0.1 nat), at 4.5× the model evaluations;
on centred funnels with 30 and 60 groups outside the suite errors of 0.04–0.09 nat
(benchmarks/reports/validation.md, "Funnels: independence moves in SMC").

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
    "one_step_kernel",
    "resolve_kernel",
]

AUTO = "auto"
CONTINUOUS_DEFAULT = "hmc"
DISCRETE_DEFAULT = "imh"
DISCRETE_DEFAULT_PER_LEVEL = "rwmh"
FINAL_STAGE_DEFAULT = "hmc_final_imh"


def resolve_kernel(
    kernel,
    kernel_kwargs: dict | None,
    layout: ParameterLayout,
    per_level: bool = False,
    resamples: bool = False,
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
    resamples : bool, default False
        The sampler resamples its particles to every stage's target (SMC): on continuous
        models without kernel options ``"auto"`` is then :data:`FINAL_STAGE_DEFAULT`.

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
    elif resamples and not kernel_kwargs:  # with options, the kernel they were written for
        name = FINAL_STAGE_DEFAULT
        reason = (
            f"all free variables are continuous: {name!r}, HMC and, at the target (after "
            "log Z is complete), independence proposals while they are accepted"
        )
    else:
        name = CONTINUOUS_DEFAULT
        reason = f"all free variables are continuous: {name!r}"
    if kernel_kwargs:
        from ...core.kernels import make_kernel

        try:
            make_kernel(name, **dict(kernel_kwargs))
        except TypeError as err:
            raise TypeError(
                f"kernel='auto' chose {name!r} ({reason}), which does not take kernel_kwargs "
                f"{sorted(kernel_kwargs)} ({err}); name the kernel, e.g. kernel={name!r} with "
                "its own options"
            ) from None
    return name, {"kernel_requested": AUTO, "kernel_reason": reason}



def one_step_kernel(kernel, kernel_kwargs: dict | None, attrs: dict):
    """The kernel of a run of one step (importance sampling from ``q0``, then moves at
    ``τ = 1``): :data:`FINAL_STAGE_DEFAULT` where ``kernel="auto"`` chose
    :data:`CONTINUOUS_DEFAULT` without options, else ``None`` (keep the kernel).

    Every move of such a run comes after its weights, so ``log Z`` is the same whatever the
    kernel; SMC's one stage makes these moves with independence proposals while they are
    accepted (one evaluation a move, against HMC's trajectory), and CR-AIS's one-step run,
    the same importance sampling, makes the same moves (issue 31).

    Parameters
    ----------
    kernel : str or MutationKernel
        The resolved kernel of the run.
    kernel_kwargs : dict or None
        The kernel's options.
    attrs : dict
        The run's attributes (``kernel_requested`` is ``"auto"`` where ``"auto"`` chose).

    Returns
    -------
    tuple (str, dict) or None
        The kernel's name and the attributes that record the choice.
    """
    if attrs.get("kernel_requested") != AUTO or kernel != CONTINUOUS_DEFAULT or kernel_kwargs:
        return None
    reason = (
        f"all free variables are continuous and the run is one step: {FINAL_STAGE_DEFAULT!r}, "
        "independence proposals at the target (after log Z is complete) while they are "
        "accepted, as SMC's one stage"
    )
    return FINAL_STAGE_DEFAULT, {"kernel_requested": AUTO, "kernel_reason": reason}
