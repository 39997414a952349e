"""The package's warning classes (a flat list; filter them by category).

``UnreliableEvidenceWarning`` is the one to watch: a run raises it, with what to do, when
its own diagnostics show that its ``log Z`` or its error bar cannot be trusted
(:func:`pymc_crais.diagnose` prints the details). Silence it with
``warnings.filterwarnings("ignore", category=pmc.UnreliableEvidenceWarning)``.
"""

from __future__ import annotations

__all__ = ["ChainDisagreementWarning", "UnreliableEvidenceWarning"]


class UnreliableEvidenceWarning(RuntimeWarning):
    """The estimate of ``log Z`` or its Monte Carlo error cannot be trusted.

    Raised by the samplers when a diagnostic of the run fails (collapsed SMC genealogy,
    heavy-tailed weights with Pareto k̂ > 0.7, moves that leave the particles where they
    were, a poor Laplace start, ``max_steps`` reached, chains that disagree beyond their
    errors). The message says which and what to do; :func:`pymc_crais.diagnose` gives the
    full report and ``sample_stats`` stores the per-chain values.
    """


class ChainDisagreementWarning(UnreliableEvidenceWarning):
    """The chains' ``log Z`` estimates disagree by more than their reported errors allow.

    A subclass of :class:`UnreliableEvidenceWarning`, raised by
    :func:`pymc_crais.log_marginal_likelihood` (and counted by :func:`pymc_crais.diagnose`)
    when the chi-square statistic of the chains' spread against their within-chain errors
    has a p-value below 0.001, or the chains span more than 2 nats and more than 4 MCSE.
    """
