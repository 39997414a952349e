"""The applied tier of the validation suite: models written as PyMC users write them.

Coordinates and dims, ``pm.Data``, centred random effects, ``pm.GaussianRandomWalk``,
``pm.AR``, ``pm.gp.Latent``, vague BUGS-style precisions... on data generated here with a
fixed seed. Each model's reference ``log Z`` is computed without SMC or AIS, two
independent ways, by :func:`reference` (``benchmarks/references/compute_applied.py`` stores
the results, both ways and their difference, in ``pymc_crais/data/applied_references.json``).

Linear-Gaussian models (:class:`GaussianSpec`): the Gaussian parameters (fixed and random
effects, latent states, a latent GP) are integrated out analytically, leaving a log
integrand over the ``k ≤ 3`` remaining hyperparameters, written in the PyMC model's own
unconstrained coordinates (``log σ``, ``log τ``...), prior density and Jacobian included.

* Way 1: tensor-product Gauss–Legendre quadrature of that integrand over a box grown until
  the integrand on its faces is 40 nats below its maximum, with a structured marginal
  (per-group Sherman–Morrison / Woodbury, a Kalman filter, an eigendecomposition); run
  again with 1.5× the nodes, the difference is the stated quadrature error.
* Way 2: importance sampling over the same hyperparameters from a Student-t at the
  integrand's Laplace fit, with the marginal computed from the dense covariance matrix of
  all observations (a Cholesky factorization; no shared code with way 1's marginal).

``tests/test_applied.py`` also checks each model against its integrand: with the
hyperparameters fixed, the PyMC model's log density is quadratic in the other coordinates,
so integrating it exactly (its mode and Hessian) must give way 1's integrand.

Models with a non-Gaussian likelihood (:class:`ISSpec`): importance sampling on the PyMC
model's own joint density (:func:`pymc_crais.validation.numeric.batched_logp`) two ways,
from two different proposals with different seeds.

Every factory returns ``(model, None, None, None)``: the reference is read from the stored
file by :meth:`pymc_crais.validation.cases.Case.build`.
"""


from __future__ import annotations

from .applied_hier import HIER_SPECS
from .applied_latent import LATENT_SPECS
from .applied_numeric import GaussianSpec, ISSpec, model_integrand
from .applied_other import OTHER_SPECS
from .applied_refs import gaussian_reference, is_reference

__all__ = ["APPLIED_SPECS", "GaussianSpec", "ISSpec", "model_integrand", "reference"]

#: name -> spec, in the tier's order
APPLIED_SPECS = {s.name: s for s in HIER_SPECS + LATENT_SPECS + OTHER_SPECS}


def reference(name: str, seed: int = 0) -> dict:
    """The two-way reference of applied case ``name`` (slow: seconds to minutes)."""
    spec = APPLIED_SPECS[name]
    if isinstance(spec, GaussianSpec):
        return gaussian_reference(spec, seed)
    return is_reference(spec, seed)

