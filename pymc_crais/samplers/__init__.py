"""The samplers of PyMC models, and what they need from a model.

This folder holds the public samplers, one module each (``ais``, ``crais``, ``smc``,
``rts``, ``mcd``, ``bridge``; ``smc_kernels`` for ``pm.sample_smc``; ``many`` for
``fit_many``). What they share is in :mod:`.engine`: a PyMC model becomes one batched NumPy
function (``engine.compile``), a vectorized prior sampler (``engine.prior``) and a map back
to named variables (``engine.mapping``); every sampler runs the NumPy core on them through
one set-up and finish path (``engine.options``, ``engine.pipeline``), one chain runner
(``engine.runner``) and one tuning module (``engine.tuning``). See docs/architecture.md.
"""

from .ais import sample_ais
from .crais import sample_crais
from .engine.compile import ModelDensity, PerParticleFallbackWarning, compile_model_density
from .engine.mapping import PosteriorMapper
from .engine.prior import PriorSampler
from .engine.runner import ChainFailedError
from .rts import sample_rts
from .smc import sample_smc

__all__ = [
    "ChainFailedError",
    "ModelDensity",
    "PerParticleFallbackWarning",
    "PosteriorMapper",
    "PriorSampler",
    "compile_model_density",
    "sample_ais",
    "sample_crais",
    "sample_rts",
    "sample_smc",
]
