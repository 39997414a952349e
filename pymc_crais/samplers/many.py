"""``fit_many``: one sampler on many models, each model a task of an executor.

Comparing dozens of candidate models (variable selection by Bayes factors) is many
independent runs. :func:`fit_many` submits one task per model to any
:class:`concurrent.futures.Executor` (a local process pool, or a Dask ``distributed``
client's ``get_executor()`` for a cluster) and returns the results by name, ready for
:func:`pymc_crais.compare`. A task is the sampler, the model and the arguments as
cloudpickle bytes; the worker compiles the model itself. Each model's seed is spawned from
``random_seed`` in the order of the models, so the results do not depend on where they ran.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Mapping

import numpy as np

from .engine.pipeline import check_executor

__all__ = ["fit_many"]


def _samplers() -> dict[str, Callable]:
    from .ais import sample_ais
    from .crais import sample_crais
    from .mcd import sample_mcd
    from .rts import sample_rts
    from .smc import sample_smc

    return {
        "ais": sample_ais,
        "crais": sample_crais,
        "smc": sample_smc,
        "rts": sample_rts,
        "mcd": sample_mcd,
    }


def _task_defaults(sampler) -> dict:
    """``cores=1`` and ``progressbar=False`` where the sampler takes them."""
    import inspect

    try:
        params = inspect.signature(sampler).parameters
    except (TypeError, ValueError):
        return {}
    defaults = {"cores": 1, "progressbar": False}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return defaults
    return {k: v for k, v in defaults.items() if k in params}


def _fit_one(payload: bytes):
    """Worker entry: unpickle ``(sampler, model, kwargs)`` and run it."""
    import cloudpickle

    from .engine.reproducible import pytensor_lock

    with pytensor_lock():  # unpickling a model builds graphs (threaded workers)
        sampler, model, kwargs = cloudpickle.loads(payload)
    return sampler(model=model, **kwargs)


def fit_many(
    models,
    sampler: str | Callable = "crais",
    *,
    executor: cf.Executor | None = None,
    random_seed=None,
    **sampler_kwargs,
) -> dict:
    """Run one sampler on every model, each model an independent task of ``executor``.

    Parameters
    ----------
    models : mapping of str to pymc.Model, or sequence of pymc.Model
        The candidates (a sequence is named ``"model_0"``, ``"model_1"``...).
    sampler : {"crais", "ais", "smc", "rts", "mcd"} or callable, default "crais"
        A sampler of this package by name, or a function taking ``model=`` and
        ``random_seed=`` (module-level, so that it pickles by reference).
    executor : concurrent.futures.Executor, optional
        Where the models run: ``None`` runs them one after the other in this process; a
        ``ProcessPoolExecutor`` on this machine; ``client.get_executor()`` of a
        ``dask.distributed.Client`` across a cluster. It is not shut down.
    random_seed : None, int or numpy.random.SeedSequence
        Each model gets the ``i``-th seed spawned from it (a ``SeedSequence``), so the same
        seed gives the same results with any executor.
    **sampler_kwargs
        Passed to the sampler (e.g. ``draws``, ``chains``). ``cores`` defaults to 1 and
        ``progressbar`` to False: a task is one process, and the number of chains
        (``max(2, cores)`` by default) must not depend on the worker's CPUs.

    Returns
    -------
    dict of str to xarray.DataTree (or what the sampler returns)
        In the order of ``models``; pass it to :func:`pymc_crais.compare`.

    Raises
    ------
    ValueError
        For an unknown sampler name or no models.
    TypeError
        For an executor without ``submit``.

    Examples
    --------
    >>> from concurrent.futures import ProcessPoolExecutor  # doctest: +SKIP
    >>> with ProcessPoolExecutor(2) as ex:  # doctest: +SKIP
    ...     fits = pmc.fit_many({"m1": m1, "m2": m2}, "crais", executor=ex, random_seed=1)
    >>> pmc.compare(fits)  # doctest: +SKIP
    """
    executor = check_executor(executor)
    if isinstance(models, Mapping):
        named = {str(k): v for k, v in models.items()}
    else:
        named = {f"model_{i}": m for i, m in enumerate(models)}
    if not named:
        raise ValueError("models is empty; pass a dict {name: pymc.Model} of the candidates")
    if isinstance(sampler, str):
        table = _samplers()
        if sampler not in table:
            raise ValueError(f"sampler={sampler!r} is unknown; choose one of {sorted(table)}")
        sampler = table[sampler]
    elif not callable(sampler):
        raise ValueError(f"sampler must be a name or a function, got {sampler!r}")
    if isinstance(random_seed, np.random.Generator):
        raise TypeError(
            "random_seed must be None, an int or a SeedSequence here (a Generator's state "
            "cannot be shared with other machines); e.g. random_seed=1"
        )
    root = (
        random_seed
        if isinstance(random_seed, np.random.SeedSequence)
        else np.random.SeedSequence(random_seed)
    )
    seeds = root.spawn(len(named))
    kwargs = {**_task_defaults(sampler), **sampler_kwargs}
    if executor is None:
        return {
            name: sampler(model=model, random_seed=seed, **kwargs)
            for (name, model), seed in zip(named.items(), seeds, strict=True)
        }
    import cloudpickle

    futures = {
        name: executor.submit(
            _fit_one, cloudpickle.dumps((sampler, model, {"random_seed": seed, **kwargs}))
        )
        for (name, model), seed in zip(named.items(), seeds, strict=True)
    }
    try:
        return {name: fut.result() for name, fut in futures.items()}
    except BaseException:
        for fut in futures.values():
            fut.cancel()
        raise
