"""Model comparison from evidence estimates: Bayes factors and posterior model probabilities.

Every estimate enters as ``(log Z, MCSE)``: from a pymc_crais result through
:func:`pymc_crais.log_marginal_likelihood`, from a ``pm.sample_smc`` result (its last
``log_marginal_likelihood`` entry per chain, with a between-chain MCSE only), or as a
``(value, mcse)`` pair. Runs of different models are independent, so the MCSE of a
difference of log evidences is the root sum of squares of the two MCSEs.
"""

from __future__ import annotations

import hashlib
import numbers

import numpy as np
from scipy.special import logsumexp

__all__ = [
    "EvidenceEstimate",
    "ObservedDataMismatchError",
    "bayes_factor",
    "compare",
    "evidence_estimate",
    "format_table",
]


class ObservedDataMismatchError(ValueError):
    """Two results were computed on different observed data, so their evidences are not comparable."""


class EvidenceEstimate(tuple):
    """``(log_z, mcse)`` with the observed-data fingerprint it came from (``None`` if unknown)."""

    def __new__(
        cls, log_z: float, mcse: float, fingerprint=None, method: str = "", flags: str = ""
    ):
        obj = super().__new__(cls, (float(log_z), float(mcse)))
        obj.fingerprint = fingerprint
        obj.method = method
        obj.flags = flags  # failed reliability checks (pymc_crais.diagnose), comma-separated
        return obj

    @property
    def log_z(self) -> float:
        return self[0]

    @property
    def mcse(self) -> float:
        return self[1]


def _observed_fingerprint(idata):
    """A fingerprint of the observed data that ignores variable names (a model name prefix
    or a renamed likelihood must not block a comparison): the sorted digests of the arrays'
    shapes and values."""
    try:
        obs = idata["observed_data"]
    except (KeyError, TypeError):
        return None
    digests = []
    for name in obs.data_vars:
        arr = np.ascontiguousarray(np.asarray(obs[name].values, dtype=np.float64))
        h = hashlib.sha256(str(arr.shape).encode())
        h.update(arr.tobytes())
        digests.append(h.hexdigest())
    return tuple(sorted(digests)) if digests else None


def evidence_estimate(result, *, name: str | None = None) -> EvidenceEstimate:
    """``(log Z, MCSE)`` of one result.

    Parameters
    ----------
    result : xarray.DataTree, SamplerResult, tuple of (float, float), or EvidenceEstimate
        The output of :func:`pymc_crais.bridge_sampling` (its ``evidence`` group), of a
        pymc_crais sampler (chains combined with
        :func:`pymc_crais.log_marginal_likelihood`), of ``pm.sample_smc`` with one of our
        kernels (each chain carries its within-chain error and diagnostics), of
        ``pm.sample_smc`` with PyMC's own kernels (last entry per chain; its MCSE is the
        between-chain standard error only, claimed with at least 4 chains and NaN, flagged
        ``no_error``, with fewer), or an explicit ``(log_z, mcse)`` pair.
    name : str, optional
        The result's name in error messages (its key in :func:`compare`).

    Returns
    -------
    EvidenceEstimate
        A ``(log_z, mcse)`` tuple that also carries the observed-data fingerprint, the
        method and the failed reliability checks (``flags``).
    """
    if isinstance(result, EvidenceEstimate):
        return result
    label = f"result {name!r}" if name is not None else "the result"
    if isinstance(result, tuple | list) and len(result) == 2 and all(isinstance(v, numbers.Real) for v in result):
        log_z, mcse = float(result[0]), float(result[1])
        if not np.isfinite(log_z) or not (mcse >= 0):
            raise ValueError(
                f"{label}: a (log_z, mcse) pair needs a finite log_z and mcse >= 0, got {result!r}"
            )
        return EvidenceEstimate(log_z, mcse)
    from .evidence_group import read_evidence

    stored = read_evidence(result)  # pmc.bridge_sampling's ``evidence`` group, read first
    if stored is not None:
        fingerprint = _observed_fingerprint(result)
        est = EvidenceEstimate(stored.log_z, stored.mcse, fingerprint, stored.method, stored.flags)
        est.observed = _observed_summary(result)
        return est
    import warnings

    from .diagnostics import problems_of
    from .result_reader import read_result
    from .results import log_marginal_likelihood
    from .warnings import UnreliableEvidenceWarning

    view = read_result(result, name=name)
    with warnings.catch_warnings():  # reported in the table's "unreliable" column instead
        warnings.simplefilter("ignore", UnreliableEvidenceWarning)
        value, mcse = log_marginal_likelihood(result)
    try:
        flags = ",".join(sorted({p.check for p in problems_of(view)}))
    except (KeyError, TypeError, ValueError):
        flags = ""
    fingerprint, described = _observed_fingerprint(result), _observed_summary(result)
    est = EvidenceEstimate(value, mcse, fingerprint, view.method, flags)
    est.observed = described
    return est


def _observed_summary(result) -> str:
    """The observed data in words (names and shapes), for mismatch messages."""
    try:
        obs = result["observed_data"]
    except (KeyError, TypeError, IndexError, AttributeError):
        return "no observed_data group"
    parts = [f"{k} {tuple(obs[k].shape)}" for k in obs.data_vars]
    return ", ".join(parts) if parts else "no observed data"


def _check_same_data(estimates: dict) -> None:
    known = {name: e.fingerprint for name, e in estimates.items() if e.fingerprint is not None}
    if len(set(known.values())) > 1:
        groups: dict = {}
        for name, fp in known.items():
            groups.setdefault(fp, []).append(name)
        listed = "; ".join(
            ", ".join(f"{n!r} ({getattr(estimates[n], 'observed', '?')})" for n in g)
            for g in groups.values()
        )
        raise ObservedDataMismatchError(
            f"the results were fitted to different observed data (groups with equal data, "
            f"with their observed variables and shapes: {listed}); evidences of different data "
            "sets cannot be compared. Fit the models to the same data, or pass "
            "check_data=False if the difference is intended (e.g. a re-encoded but "
            "equivalent likelihood)"
        )


def bayes_factor(a, b, *, check_data: bool = True) -> tuple[float, float]:
    """The log Bayes factor ``log Z_a − log Z_b`` and its Monte Carlo standard error.

    Parameters
    ----------
    a, b : xarray.DataTree or (float, float)
        Results of pymc_crais samplers (or ``pm.sample_smc``) on the same observed data, or
        ``(log_z, mcse)`` pairs.
    check_data : bool, default True
        Refuse results whose ``observed_data`` differ.

    Returns
    -------
    log_bf : float
        Positive values favour ``a``.
    mcse : float
        ``sqrt(mcse_a² + mcse_b²)`` (the runs are independent).

    Raises
    ------
    ObservedDataMismatchError
        If ``check_data`` and the two results were computed on different observed data.
    """
    ea, eb = evidence_estimate(a, name="a"), evidence_estimate(b, name="b")
    if check_data:
        _check_same_data({"a": ea, "b": eb})
    return ea.log_z - eb.log_z, float(np.hypot(ea.mcse, eb.mcse))


def compare(results: dict, *, check_data: bool = True, n_draws: int = 20000, random_seed=0):
    """Rank models by evidence: log Z, log Bayes factors against the best, and posterior
    model probabilities under equal prior odds, each with its Monte Carlo uncertainty.

    Parameters
    ----------
    results : dict
        ``name -> result``; a result is the DataTree of a pymc_crais sampler (or of
        ``pm.sample_smc``) or a ``(log_z, mcse)`` pair.
    check_data : bool, default True
        Refuse results computed on different observed data.
    n_draws : int, default 20000
        Draws of the log evidences from ``N(log Z, MCSE²)`` used to propagate the Monte
        Carlo error into the model probabilities.
    random_seed : int or numpy.random.Generator, default 0
        Seeds those draws (the table is deterministic by default).

    Returns
    -------
    ComparisonTable
        A ``pandas.DataFrame`` (printed as a fixed-width table) with one row per model, best first, with columns ``log_z``, ``mcse``, ``log_bf`` (against
        the best model, so ``≤ 0``), ``log_bf_mcse``, ``prob`` (posterior probability under
        equal prior odds), ``prob_lo``/``prob_hi`` (2.5 % and 97.5 % quantiles of that
        probability under the Monte Carlo error of all estimates; NaN, shown ``n/a``, when
        any estimate has no MCSE), ``prob_best`` (the share
        of draws in which the model has the largest evidence), ``method`` and ``unreliable``
        (the failed reliability checks of :func:`pymc_crais.diagnose`, comma-separated;
        empty when the estimate passed them all or cannot be checked).

    Raises
    ------
    ObservedDataMismatchError
        If ``check_data`` and the results were computed on different observed data.
    """
    import pandas as pd

    if not isinstance(results, dict) or len(results) < 1:
        raise TypeError("results must be a non-empty dict mapping model names to results")
    if not (isinstance(n_draws, numbers.Integral) and n_draws >= 100):
        raise ValueError(f"n_draws must be an integer >= 100, got {n_draws!r}")
    estimates = {str(k): evidence_estimate(v, name=str(k)) for k, v in results.items()}
    if check_data:
        _check_same_data(estimates)
    names = list(estimates)
    log_z = np.array([estimates[n].log_z for n in names])
    mcse = np.array([estimates[n].mcse for n in names])
    order = np.argsort(-log_z, kind="stable")
    best = order[0]
    log_bf = log_z - log_z[best]
    log_bf_mcse = np.hypot(mcse, mcse[best])
    log_bf_mcse[best] = 0.0
    prob = np.exp(log_z - logsumexp(log_z))
    rng = random_seed if isinstance(random_seed, np.random.Generator) else np.random.default_rng(random_seed)
    spread = np.where(np.isfinite(mcse), mcse, 0.0)
    draws = log_z + rng.standard_normal((int(n_draws), log_z.size)) * spread
    probs = np.exp(draws - logsumexp(draws, axis=1, keepdims=True))
    lo, hi = np.quantile(probs, [0.025, 0.975], axis=0)
    if not np.all(np.isfinite(mcse)):  # an unknown error leaves every probability undetermined
        lo, hi = np.full_like(lo, np.nan), np.full_like(hi, np.nan)
    prob_best = np.bincount(np.argmax(draws, axis=1), minlength=log_z.size) / draws.shape[0]
    if not np.all(np.isfinite(mcse)):
        prob_best = np.full(log_z.size, np.nan)
    columns = {
        "log_z": log_z,
        "mcse": mcse,
        "log_bf": log_bf,
        "log_bf_mcse": log_bf_mcse,
        "prob": prob,
        "prob_lo": lo,
        "prob_hi": hi,
        "prob_best": prob_best,
        "method": np.array([estimates[n].method for n in names], dtype=object),
        "unreliable": np.array([getattr(estimates[n], "flags", "") for n in names], dtype=object),
    }
    table = _table_class()(
        {k: v[order] for k, v in columns.items()},
        index=pd.Index([names[i] for i in order], name="model"),
    )
    table.attrs["description"] = (
        "log_bf against the best model; probabilities under equal prior odds; "
        "prob_lo/prob_hi: 95% Monte Carlo interval"
    )
    return table


def _comparison_table_class():
    import pandas as pd

    class ComparisonTable(pd.DataFrame):
        """The table :func:`compare` returns: a ``pandas.DataFrame`` whose text repr is the
        fixed-width rendering of :func:`format_table` (derived frames are plain DataFrames)."""

        @property
        def _constructor(self):
            return pd.DataFrame

        def __repr__(self) -> str:
            try:
                return format_table(self)
            except (AttributeError, KeyError, TypeError, ValueError):
                return pd.DataFrame(self).__repr__()

        __str__ = __repr__

    return ComparisonTable


def __getattr__(name):
    if name == "ComparisonTable":
        return _table_class()
    raise AttributeError(name)


_TABLE_CLASS = None


def _table_class():
    global _TABLE_CLASS
    if _TABLE_CLASS is None:
        _TABLE_CLASS = _comparison_table_class()
    return _TABLE_CLASS


def _prob(p: float) -> str:
    """A probability with three decimals; below 0.001 (but not 0) as ``<0.001``; ``n/a``
    when unknown."""
    if not np.isfinite(p):
        return "n/a"
    return "<0.001" if 0.0 < p < 5e-4 else f"{p:.3f}"


def _err(v: float) -> str:
    return f"{v:>7.3f}" if np.isfinite(v) else f"{'n/a':>7}"


def format_table(table, title: str | None = None) -> str:
    """A plain-text rendering of a :func:`compare` table (fixed width, for logs and the CLI)."""
    lines = [title] if title else []
    lines.append(
        f"{'model':<22} {'log Z':>10} {'± MCSE':>7} {'log BF':>9} {'± MCSE':>7} "
        f"{'P(model)':>9} {'95% MC interval':>17}  unreliable"
    )
    for name, row in table.iterrows():
        # by key: ``row.flags`` is pandas' own attribute, not the column
        flags = row["unreliable"] if "unreliable" in row.index else ""
        interval = (
            f"[{_prob(row.prob_lo)}, {_prob(row.prob_hi)}]"
            if np.isfinite(row.prob_lo) and np.isfinite(row.prob_hi)
            else "n/a"
        )
        lines.append(
            f"{name!s:<22} {row.log_z:>10.3f} {_err(row.mcse)} {row.log_bf:>9.3f} "
            f"{_err(row.log_bf_mcse)} {_prob(row.prob):>9}   {interval:>16}"
            + (f"  UNRELIABLE: {flags}" if flags else "")
        )
    return "\n".join(lines)
