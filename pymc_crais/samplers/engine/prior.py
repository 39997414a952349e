"""Initial particles: exact draws from the prior in unconstrained space, vectorized.

:func:`~pymc_crais.samplers.engine.vectorize.vectorize_random_graph` draws every random variable
of the model's forward graph ``n`` times (hierarchical shapes included: a ``shape=d``
vector whose scale is another variable) and batches the forward transforms. One compiled
call draws the whole population. Custom ``initval``s are ignored on purpose: ``q0`` must be the prior for the
evidence to be right (PyMC's own SMC puts every particle on the initval instead).

Random variables that PyTensor's Numba backend can only run in object mode are first
replaced by an equivalent one it compiles natively (:func:`native_draws`): PyMC's
``DiscreteUniform`` draws through ``scipy.stats.randint``, which Numba wraps anew at every
compilation (about 1.5 s a call of a switchpoint model, and a ``UserWarning`` each time);
``integers(lower, upper + 1)`` draws from the same distribution and compiles once, into
PyTensor's cache.

Vague Gamma and inverse-gamma priors (BUGS' ``dgamma(0.001, 0.001)`` precisions) are drawn
in log space (:func:`log_space_draw`): about half of the draws of ``Gamma(0.001, 0.001)``
are below the smallest float64 and round to 0, whose log-transformed value ``-inf`` would
start a particle at ``-inf``. ``log X`` itself is drawn instead, exactly:
``X = G·U^{1/a}`` with ``G ~ Gamma(a + 1)`` and ``U ~ U(0, 1)`` independent, so
``log X = log G + log(U)/a + log(scale)`` (``-log X`` of that for the inverse gamma). Its
density, what ``log q0`` evaluates (the model's prior with the log transform's Jacobian),
stays finite and exact at such values (PyMC writes the Gamma log-density of ``exp(u)`` in
``u``). Variables below it (``a ~ Normal(0, tau=tau_a)``) are drawn given ``exp(log X)``,
as before: the same joint distribution; a child of a precision that is 0 in float64 is
infinite, and that particle has a zero weight, as it would with exact arithmetic to
within float64 (its likelihood underflows).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytensor.tensor.random.basic as ptr
from pymc.distributions.discrete import DiscreteUniformRV
from pymc.logprob.transforms import LogTransform
from pytensor.graph.replace import graph_replace
from pytensor.graph.rewriting.basic import node_rewriter
from pytensor.tensor.random.type import RandomGeneratorType
from pytensor.tensor.variable import TensorConstant

from ...warnings import user_stacklevel
from .compile import (
    ParameterLayout,
    PerParticleFallbackWarning,
    cached_on_model,
    reproducible_compile,
    resolve_compile_kwargs,
    uses_jax,
)
from .reproducible import few_calls_compile_kwargs
from .rewrites import apply_node_rewriters
from .vectorize import vectorize_random_graph

__all__ = ["PriorSampler", "log_space_draw", "native_draws", "prior_sampler"]

#: Gamma and inverse-gamma variables with a constant shape below this are drawn in log space
#: (:func:`log_space_draw`); at 0.1 a direct draw underflows with probability ~1e-31.
LOG_SPACE_SHAPE = 0.1


def log_space_draw(rv):
    """``log rv`` drawn without forming ``rv``, for a Gamma or inverse-gamma ``rv`` whose
    shape parameter is a constant below :data:`LOG_SPACE_SHAPE`; ``None`` otherwise.

    ``log X = log G + log(1 − U)/a + log(scale)``, ``G ~ Gamma(a + 1, 1)``, ``U ~ U[0, 1)``
    (``1 − U`` is in ``(0, 1]``, so its log is finite); ``−`` that with ``scale = 1/β`` for
    ``InverseGamma(a, β)``. The Gamma draw uses ``rv``'s own generator, the uniform one a
    new shared generator (re-seeded with the others by :meth:`PriorSampler.draw`).
    """
    node = rv.owner
    if node is None or not isinstance(node.op, (ptr.GammaRV, ptr.InvGammaRV)):
        return None
    rng, size, alpha, second = node.inputs
    if not isinstance(alpha, TensorConstant) or not np.all(alpha.data < LOG_SPACE_SHAPE):
        return None
    ones = pt.ones_like(alpha + second)
    g = ptr.gamma(alpha + ones, scale=ones, size=size, rng=rng, return_next_rng=True)[1]
    u_rng = pytensor.shared(np.random.default_rng(0))
    u = ptr.uniform(pt.zeros_like(ones), ones, size=size, rng=u_rng, return_next_rng=True)[1]
    log_std = pt.log(g) + pt.log1p(-u) / alpha  # log of a Gamma(alpha, 1) draw
    if isinstance(node.op, ptr.GammaRV):  # (shape, scale)
        return log_std + pt.log(second)
    return pt.log(second) - log_std  # InverseGamma(alpha, beta) = beta / Gamma(alpha, 1)


@node_rewriter([DiscreteUniformRV])
def local_discrete_uniform_to_integers(fgraph, node):
    """``discrete_uniform(lower, upper)`` → ``integers(ceil(lower), floor(upper) + 1)``: the
    same distribution, uniform on the integers of ``[lower, upper]`` (the support of its
    log-density; bounds may be given as floats), with the same generator input, and a draw
    that Numba and JAX compile natively (both ``int64``)."""
    rng, size, lower, upper = node.inputs
    low = pt.cast(pt.ceil(lower), "int64")
    high = pt.cast(pt.floor(upper), "int64") + 1
    return ptr.integers.make_node(rng, size, low, high).outputs


NATIVE_DRAWS = {DiscreteUniformRV: local_discrete_uniform_to_integers}
"""Random variable type → the node rewriter that draws it natively."""


def native_draws(outputs: list) -> list:
    """A random graph with every random variable that has a natively compiled equivalent
    (see the module docstring) replaced by it.

    The graph is cloned and its inputs, the shared random generators among them, are kept;
    a graph without such variables is returned as it is. ``outputs`` and the result are
    lists of PyTensor variables.
    """
    from pytensor.graph.traversal import applys_between

    outputs = list(outputs)
    present = {type(n.op) for n in applys_between([], outputs)}
    rewriters = [r for cls, r in NATIVE_DRAWS.items() if any(issubclass(t, cls) for t in present)]
    if not rewriters:
        return outputs
    return apply_node_rewriters(outputs, rewriters, "pymc_crais_native_draws")


def prior_sampler(
    model, layout: ParameterLayout, compile_kwargs: dict | None = None
) -> PriorSampler:
    """A :class:`PriorSampler` for ``model``, compiled once per model and compile options.

    Drawing re-seeds the compiled function from the caller's generator each time, so a
    cached sampler gives the same draws as a fresh one.
    """
    ckw = dict(compile_kwargs or {})
    if uses_jax(ckw):
        # JAX copies the random generators into the compiled function, so re-seeding them
        # (what makes draws reproducible) would have no effect: draw with Numba instead
        ckw = {**ckw, "mode": "NUMBA"}
    return cached_on_model(model, ckw, ("prior",), lambda: PriorSampler(model, layout, ckw))


class PriorSampler:
    """Draws ``(n, d)`` arrays of prior samples in the model's unconstrained space.

    Parameters
    ----------
    model : pymc.Model
    layout : ParameterLayout
        Raveling of the free variables (from :func:`parameter_layout`).
    compile_kwargs : dict, optional
        Passed to PyMC's ``compile``.

    Notes
    -----
    Discrete variables are drawn as integers and then jittered by ``U(−½, ½)``: the
    engine works with the continuous relaxation ``p(round(θ))``, whose density integrates
    to one, so a jittered prior draw is an exact draw of that relaxed ``q0``.
    """

    def __init__(self, model, layout: ParameterLayout, compile_kwargs: dict | None = None):
        self.layout = layout
        free = list(model.free_RVs)
        n = pt.iscalar("n_particles")
        outs, in_log_space = [], {}
        for rv in free:
            tr = model.rvs_to_transforms.get(rv)
            log_val = log_space_draw(rv) if isinstance(tr, LogTransform) else None
            if log_val is not None:
                in_log_space[rv] = pt.exp(log_val)  # what the variables below it are drawn on
                val = log_val
            else:
                val = tr.forward(rv, *rv.owner.inputs) if tr is not None else rv
            outs.append(pt.as_tensor_variable(val).astype("float64"))
        if in_log_space:
            outs = graph_replace(outs, in_log_space, strict=False)
        # drawn a few times a run: no code generation (few_calls_compile_kwargs)
        full_ckw = resolve_compile_kwargs(None, compile_kwargs)
        ckw = few_calls_compile_kwargs(full_ckw)
        self.vectorized = True
        try:
            batched = native_draws(vectorize_random_graph(outs, batch_shape=(n,)))
            x = pt.concatenate([b.reshape((n, -1)) for b in batched], axis=1)
            self._fn = reproducible_compile([n], x, **ckw)
            self._fn(2)
        except Exception as err:
            warnings.warn(
                f"could not vectorize prior sampling ({type(err).__name__}: {err}); drawing "
                "the initial particles one at a time",
                PerParticleFallbackWarning,
                stacklevel=user_stacklevel(),
            )
            self.vectorized = False
            flat = pt.concatenate([o.reshape((-1,)) for o in native_draws(outs)])
            # called once per particle: compiled code (the default mode) where it compiles,
            # not the Python linker, whose Scan of a 120-state AR(1) took 10 s for 2,000 draws
            try:
                self._fn = reproducible_compile([], flat, **full_ckw)
                self._fn()
            except Exception:  # noqa: BLE001 (an Op without compiled code: the Python linker)
                self._fn = reproducible_compile([], flat, **ckw)
        self._rng_vars = [
            v for v in self._fn.get_shared() if isinstance(v.type, RandomGeneratorType)
        ]
        self._discrete_cols = np.concatenate(
            [np.arange(s.start, s.stop) for s in layout.slots if s.discrete] or [[]]
        ).astype(int)

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` exact prior draws, shape ``(n, d)``, reproducible from ``rng``.

        Parameters
        ----------
        rng : numpy.random.Generator
            Seeds the compiled function's random generators (and the jitter).
        n : int
            Number of particles.
        """
        # Child seeds come from rng's *state*: rng.spawn() would use its SeedSequence, which
        # generators rebuilt from a state (as pm.sample_smc's workers do) can share.
        seeds = rng.integers(0, 2**63, size=(len(self._rng_vars), 2))
        for var, seed in zip(self._rng_vars, seeds, strict=True):
            var.set_value(np.random.default_rng(seed), borrow=True)
        if self.vectorized:
            x = np.asarray(self._fn(n), dtype=np.float64)
        else:
            x = np.stack([np.asarray(self._fn(), dtype=np.float64) for _ in range(n)])
        x = x.reshape(n, self.layout.dim)
        if self._discrete_cols.size:
            x[:, self._discrete_cols] += rng.uniform(-0.5, 0.5, (n, self._discrete_cols.size))
        return x
