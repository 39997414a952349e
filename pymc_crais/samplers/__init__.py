"""The samplers of PyMC models, and what they need from a model.

A PyMC model becomes one batched NumPy function (``compile``), a vectorized prior sampler
(``prior``) and a map back to named variables (``mapping``); every public sampler (``ais``,
``crais``, ``smc``, ``rts``; ``smc_kernels`` for ``pm.sample_smc``) runs the NumPy core on
them through one set-up and finish path (``options``, ``pipeline``), one chain runner
(``runner``) and one tuning module (``tuning``). See docs/architecture.md.
"""

from .ais import sample_ais
from .compile import ModelDensity, PerParticleFallbackWarning, compile_model_density
from .crais import sample_crais
from .mapping import PosteriorMapper
from .prior import PriorSampler
from .rts import sample_rts
from .runner import ChainFailedError
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
