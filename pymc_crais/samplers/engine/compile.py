"""Compile a PyMC model into one batched function over an ``(N, d)`` particle array.

The model's free variables are raveled in PyMC's unconstrained (value) space into a
vector ``θ ∈ R^d`` in the order of ``model.value_vars``. One compiled call maps a whole
population to ``log prior`` (``model.varlogp``, Jacobians included), the log-likelihood
``ℓ`` (``model.datalogp``: observed variables plus potentials) and, when asked, their
gradients. The batched graph is built with
:func:`pytensor.graph.replace.vectorize_graph`; if that fails the layer falls back to a
per-particle loop and warns.
"""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.replace import clone_replace

from ...warnings import user_stacklevel
from .gradients import batched_gradients
from .model_density import ModelDensity
from .model_graph import batched_model_graph, model_compilers, uses_jax
from .reproducible import ReproducibleFunction, reproducible_compile
from .rewrites import checks_per_particle, simplify_logp_graph
from .staged import TwoStage

__all__ = [
    "ModelDensity",
    "ParameterLayout",
    "PerParticleFallbackWarning",
    "ReproducibleFunction",
    "compile_model_density",
    "parameter_layout",
    "reproducible_compile",
    "resolve_compile_kwargs",
    "uses_jax",
]


class PerParticleFallbackWarning(UserWarning):
    """The model graph could not be vectorized; a slower per-particle loop is used."""


@dataclass(frozen=True)
class VariableSlot:
    """Where one free variable lives in the raveled vector."""

    name: str  # the value variable's name (e.g. ``sigma_log__``)
    rv_name: str  # the random variable's name (e.g. ``sigma``)
    shape: tuple
    dtype: str
    start: int
    stop: int
    discrete: bool

    @property
    def size(self) -> int:
        """Number of raveled entries."""
        return self.stop - self.start


@dataclass(frozen=True)
class ParameterLayout:
    """The raveling of a model's free variables into ``θ ∈ R^d``."""

    slots: tuple[VariableSlot, ...]

    @property
    def dim(self) -> int:
        """``d``."""
        return self.slots[-1].stop if self.slots else 0

    @property
    def discrete_names(self) -> list[str]:
        """Names of the discrete free variables."""
        return [s.rv_name for s in self.slots if s.discrete]

    @property
    def has_discrete(self) -> bool:
        """Whether any free variable is discrete."""
        return any(s.discrete for s in self.slots)


def parameter_layout(model) -> ParameterLayout:
    """The :class:`ParameterLayout` of ``model`` (shapes from its initial point).

    Parameters
    ----------
    model : pymc.Model
    """
    from pymc.vartypes import discrete_types

    ip = model_initial_point(model)
    slots, start = [], 0
    for rv in model.free_RVs:
        value = model.rvs_to_values[rv]
        arr = np.asarray(ip[value.name])
        slots.append(
            VariableSlot(
                name=value.name,
                rv_name=rv.name,
                shape=tuple(arr.shape),
                dtype=str(rv.dtype),
                start=start,
                stop=start + arr.size,
                discrete=rv.dtype in discrete_types,
            )
        )
        start += arr.size
    return ParameterLayout(tuple(slots))


def model_initial_point(model) -> dict:
    """``model.initial_point()``, computed once per model and initial values.

    PyMC compiles a function for every ``initial_point()`` call (about 0.1 s each); a
    sampler call needed it six times. Cached like the compiled functions
    (:func:`cached_on_model`), with the model's initial values in the key, so
    ``model.set_initval`` is seen. A copy is returned (the caller may not change the cache).
    """
    initvals = tuple(
        (rv, v if v is None or isinstance(v, str) else id(v))
        for rv, v in model.rvs_to_initial_values.items()
    )
    ip = cached_on_model(model, {}, ("initial_point", initvals), lambda: _initial_point(model))
    return {k: np.array(v, copy=True) for k, v in ip.items()}


def _initial_point(model) -> dict:
    """``model.initial_point()``, compiled on the Python linker (:func:`few_calls_mode`):
    PyMC compiles it with ``FAST_COMPILE``, whose VM builds PyTensor's C loop module with an
    empty cache (0.55–0.9 s) without using it. The same graph (PyMC's initial-point
    expression, fresh random generators, reseeded as PyMC does) and the same ``perform``
    methods, so the same values."""
    from pymc.initial_point import make_initial_point_expression
    from pymc.pytensorf import compile, find_rng_nodes, replace_rng_nodes, reseed_rngs
    from pymc.util import get_transformed_name

    from .reproducible import few_calls_mode

    values = make_initial_point_expression(
        free_rvs=model.free_RVs,
        rvs_to_transforms=model.rvs_to_transforms,
        initval_strategies=dict(model.rvs_to_initial_values),
        jitter_rvs=None,
        default_strategy="support_point",
        return_transformed=True,
    )
    values = replace_rng_nodes(values)
    fn = compile(inputs=[], outputs=values, mode=few_calls_mode())
    reseed_rngs(find_rng_nodes(fn.maker.fgraph.outputs), None)
    names = [
        get_transformed_name(rv.name, t) if (t := model.rvs_to_transforms[rv]) else rv.name
        for rv in model.free_RVs
    ]
    return dict(zip(names, fn(), strict=True))


def initial_point_vector(model, layout: ParameterLayout) -> np.ndarray:
    """The model's initial point raveled as ``θ`` (float64, in unconstrained space)."""
    ip = model_initial_point(model)
    return np.concatenate([np.asarray(ip[s.name], dtype=np.float64).ravel() for s in layout.slots])


def resolve_compile_kwargs(backend: str | None, compile_kwargs: dict | None) -> dict:
    """Merge ``backend`` into ``compile_kwargs`` exactly as ``pm.sample_smc`` does."""
    from pymc.pytensorf import resolve_backend_compile_kwargs

    return dict(resolve_backend_compile_kwargs(backend, dict(compile_kwargs or {})))


def joined_scalar_graph(model, outputs, layout: ParameterLayout):
    """``outputs`` as functions of one raveled float vector ``θ`` (discrete inputs rounded),
    parameter checks already ``-inf`` switches of this one ``θ`` (:func:`checks_per_particle`:
    batched, a check would otherwise hold for all particles or for none)."""
    from pymc.pytensorf import join_nonshared_inputs

    ip = model_initial_point(model)
    value_vars = model.value_vars
    replace, inputs = {}, []
    for v, slot in zip(value_vars, layout.slots, strict=True):
        if slot.discrete:
            fv = pt.TensorType("float64", v.type.shape)(v.name)
            replace[v] = pt.round(fv).astype(v.dtype)
            inputs.append(fv)
        else:
            inputs.append(v)
    if replace:
        outputs = clone_replace(outputs, replace, rebuild_strict=False)
    point = {k: np.asarray(val, dtype="float64") for k, val in ip.items()}
    outs, theta = join_nonshared_inputs(point=point, outputs=outputs, inputs=inputs)
    return checks_per_particle(outs, bool(getattr(model, "check_bounds", True))), theta


def compile_model_density(
    model,
    *,
    gradient: bool = True,
    compile_kwargs: dict | None = None,
    vectorize: bool = True,
    simplify: bool = True,
) -> ModelDensity:
    """Compile ``model`` into a :class:`ModelDensity` evaluating whole populations at once.

    Parameters
    ----------
    model : pymc.Model
    gradient : bool, default True
        Also compile the batched gradients (needed by gradient kernels).
    compile_kwargs : dict, optional
        Passed to ``pytensor.function`` via PyMC's ``compile`` (after
        :func:`resolve_compile_kwargs`).
    vectorize : bool, default True
        Build the batched graph; ``False`` forces the per-particle loop (for comparisons).
    simplify : bool, default True
        Apply the rewrites of :mod:`pymc_crais.samplers.engine.rewrites`: the exact ones (e.g.
        Bernoulli-logit's log-density with one softplus instead of two) before
        differentiating, and, inside the compilation, softplus terms of sums as
        ``maximum(x, 0) + log(1 + exp(-|x|))`` (absolute error below 2.3e-16 an element,
        about twice as fast). ``False`` compiles PyMC's graph as it is (for comparisons).

    Returns
    -------
    ModelDensity
    """
    layout = parameter_layout(model)
    if layout.dim == 0:
        raise ValueError(
            "the model has no free random variables; there is nothing to sample and its "
            "evidence is just its likelihood. Add at least one unobserved variable."
        )
    ckw = dict(compile_kwargs or {})
    compiled = cached_on_model(
        model,
        ckw,
        ("density", gradient, vectorize, simplify),
        lambda: _compile_model_functions(model, layout, ckw, gradient, vectorize, simplify),
    )
    vectorized, fn, fn_grad, grad_error, fallback_reason, numpy_cost = compiled
    if not vectorized and vectorize:
        warnings.warn(
            "pymc_crais could not vectorize this model's log-density "
            f"({fallback_reason}); falling back to a per-particle loop, which is much slower.",
            PerParticleFallbackWarning,
            stacklevel=user_stacklevel(),
        )
    return ModelDensity(
        layout.dim, layout, vectorized, fn, fn_grad, grad_error, numpy_cost=numpy_cost
    )


# Compiled functions per model, so that repeated sample_* calls on one model (a benchmark
# grid, a notebook re-run, CR-AIS's pilot/tuning/final runs) compile once. Weakly keyed:
# an entry dies with its model. Values hold no reference to the model.
_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def compile_cache_key(model, compile_kwargs: dict, *flags) -> tuple | None:
    """The cache key of ``model``'s compiled functions, or None if it cannot be hashed.

    The key holds the model's variables themselves (free, value, observed, potentials,
    deterministics and their transforms), so a model changed after its first compilation
    (a variable added) gets a new entry; ``pm.Data`` containers are shared variables read
    at call time, so ``pm.set_data`` needs no recompilation. The compile options and
    PyTensor's global mode, linker and floatX are part of the key.
    """
    import pytensor

    try:
        key = (
            tuple(model.free_RVs),
            tuple(model.value_vars),
            tuple(model.observed_RVs),
            tuple(model.potentials),
            tuple(model.deterministics),
            tuple(model.rvs_to_transforms.get(rv) for rv in model.free_RVs),
            bool(getattr(model, "check_bounds", True)),
            tuple(sorted(compile_kwargs.items())),
            (str(pytensor.config.mode), str(pytensor.config.linker), pytensor.config.floatX),
            flags,
        )
        hash(key)
    except TypeError:  # an unhashable compile option: compile without caching
        return None
    return key


def cached_on_model(model, compile_kwargs: dict, tag: tuple, build):
    """``build()``, or the object an earlier call with the same model, options and ``tag``
    built (see :func:`compile_cache_key`)."""
    key = compile_cache_key(model, compile_kwargs, *tag)
    if key is None:
        return build()
    entries = _COMPILED.setdefault(model, {})
    if key not in entries:
        entries[key] = build()
    return entries[key]


def clear_compile_cache() -> None:
    """Forget every compiled model function (the next ``sample_*`` call recompiles)."""
    _COMPILED.clear()


def model_scalar_graph(model, layout):
    """``((log prior, ℓ), θ)``: the model's two scalar log-densities of one raveled ``θ``."""
    (lp, ll), theta = joined_scalar_graph(model, [model.varlogp, model.datalogp], layout)
    return (pt.as_tensor_variable(lp).astype("float64"),
            pt.as_tensor_variable(ll).astype("float64")), theta  # fmt: skip


def _compile_model_functions(model, layout, ckw, gradient, vectorize, simplify) -> tuple:
    """``(vectorized, fn, fn_grad, grad_error, fallback_reason, numpy_cost)`` for
    :func:`compile_model_density`."""
    (lp, ll), theta = model_scalar_graph(model, layout)
    compiler, stages = model_compilers(ckw, simplify)
    grad_error = None
    if vectorize:
        try:
            xb, (blp, bll) = batched_model_graph(lp, ll, theta, simplify)
            fn_grad = None
            if gradient:
                try:
                    g_lp, g_ll = batched_gradients([blp.sum(), bll.sum()], xb, layout.dim)
                    fn_grad = stages.compile([xb], [blp, bll, g_lp, g_ll])
                except Exception as err:  # no gradient for some Op
                    grad_error = f"{type(err).__name__}: {err}"
            # the values alone: compiled now only if no gradient function will serve the
            # sampler (Numba's code generation dominates a cold compilation)
            fn = stages.compile([xb], [blp, bll], lazy=fn_grad is not None)
            # smoke test on two copies of the initial point, so failures surface here, and the
            # first call (Numba's JIT, where there is no NumPy stage) happens here, once, not
            # in every worker process
            x0 = np.tile(initial_point_vector(model, layout), (2, 1))
            primary = fn_grad or fn
            if isinstance(primary, TwoStage):
                try:
                    primary.first(x0)
                except Exception:  # no Python implementation of some Op: Numba alone
                    fn_grad, fn = (f.then if isinstance(f, TwoStage) else f for f in (fn_grad, fn))
                    stages.cost, primary = None, fn_grad or fn
            if not isinstance(primary, TwoStage):
                primary(x0)
            return True, fn, fn_grad, grad_error, None, stages.cost
        except Exception as err:
            fallback_reason = f"{type(err).__name__}: {err}"
    else:
        fallback_reason = None
    if simplify:
        lp, ll = simplify_logp_graph([lp, ll])
    fn = compiler.compile([theta], [lp, ll])
    fn_grad = None
    if gradient:
        try:
            fn_grad = compiler.compile(
                [theta],
                [
                    lp,
                    ll,
                    pt.grad(lp, theta, disconnected_inputs="ignore"),
                    pt.grad(ll, theta, disconnected_inputs="ignore"),
                ],
            )
        except Exception as err:
            grad_error = f"{type(err).__name__}: {err}"
    return False, fn, fn_grad, grad_error, fallback_reason, None
