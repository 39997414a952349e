"""``pmc.cross_check``: do two estimates of one model's evidence agree within their errors?

Two estimators that share no machinery (bridge sampling on NUTS draws, annealing from the
prior) fail in different ways, so their agreement is the strongest check there is; where
they disagree, the report says which to trust and why.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .comparison import EvidenceEstimate, ObservedDataMismatchError, evidence_estimate

__all__ = ["CrossCheck", "cross_check"]


@dataclass(frozen=True)
class CrossCheck:
    """What :func:`cross_check` returns; ``str()`` gives the report.

    Attributes
    ----------
    agree : bool or None
        ``|difference| ≤ n_sigma · combined_mcse + floor``; ``None`` when an error is
        unknown (NaN).
    difference : float
        ``log Z_a − log Z_b``.
    combined_mcse : float
        ``sqrt(mcse_a² + mcse_b²)`` (independent estimates).
    tolerance : float
        ``n_sigma · combined_mcse + floor``.
    trust : str or None
        The name of the estimate to trust when they disagree (``None`` when they agree,
        or when nothing tells them apart).
    reason : str
        Why.
    a, b : EvidenceEstimate
        The two estimates (``log_z``, ``mcse``, ``method``, ``flags``).
    names : tuple of str
    """

    agree: bool | None
    difference: float
    combined_mcse: float
    tolerance: float
    trust: str | None
    reason: str
    a: EvidenceEstimate
    b: EvidenceEstimate
    names: tuple[str, str]

    def __str__(self) -> str:
        na, nb = self.names
        lines = [
            f"{na}: log Z = {self.a.log_z:.3f} ± {self.a.mcse:.3f} ({self.a.method or 'unknown method'})"
            + (f", flagged: {self.a.flags}" if self.a.flags else ""),
            f"{nb}: log Z = {self.b.log_z:.3f} ± {self.b.mcse:.3f} ({self.b.method or 'unknown method'})"
            + (f", flagged: {self.b.flags}" if self.b.flags else ""),
            f"difference {self.difference:+.3f}, tolerance {self.tolerance:.3f} "
            f"(combined MCSE {self.combined_mcse:.3f})",
        ]
        verdict = {True: "they agree", False: "they DISAGREE", None: "undecided"}[self.agree]
        lines.append(f"{verdict}: {self.reason}")
        return "\n".join(lines)


def _which_to_trust(ea, eb, na, nb) -> tuple[str | None, str]:
    fa, fb = bool(ea.flags), bool(eb.flags)
    if fa != fb:
        good, bad, flags = (nb, na, ea.flags) if fa else (na, nb, eb.flags)
        return good, (
            f"trust {good}: {bad} failed its own checks ({flags}), {good} passed them; "
            f"rerun {bad} until its checks pass, and expect it to move towards {good}"
        )
    hi, lo = (na, nb) if ea.log_z > eb.log_z else (nb, na)
    both = "both failed their own checks; " if fa else ""
    return hi, (
        f"{both}more likely {hi}, the larger estimate: an estimator that misses part of the "
        f"posterior mass (a mode NUTS never visited, which a bridge then omits, or one that "
        f"annealing particles lost) reports too low a log Z, while too high a value needs "
        f"heavy-tailed weights that its checks usually flag. Look for a second mode (plot "
        f"the draws, run pmc.sample_smc with more particles) before trusting either"
    )


def cross_check(a, b, *, names=("a", "b"), n_sigma: float = 3.0, floor: float = 0.05, check_data: bool = True) -> CrossCheck:
    """Whether two estimates of the same model's ``log Z`` agree within their combined error.

    Parameters
    ----------
    a, b : xarray.DataTree or (float, float)
        Two estimates of one model's evidence: the output of
        :func:`pymc_crais.bridge_sampling`, of a pymc_crais sampler or of ``pm.sample_smc``,
        or ``(log_z, mcse)`` pairs.
    names : tuple of str, default ("a", "b")
        How the report calls them (e.g. ``("bridge", "smc")``).
    n_sigma : float, default 3.0
        Allowed multiple of the combined standard error.
    floor : float, default 0.05
        Nats added to the tolerance (biases below the errors, e.g. a reference's
        rounding, should not fail the check).
    check_data : bool, default True
        Refuse estimates computed on different observed data.

    Returns
    -------
    CrossCheck
        ``agree``, the difference and tolerance, and ``trust``/``reason``: when they
        disagree, the estimate that passed its own checks where the other did not;
        otherwise the larger one, since missing posterior mass (a mode) lowers an
        estimate.

    Raises
    ------
    ObservedDataMismatchError
        If ``check_data`` and the two were computed on different observed data.
    ValueError
        For a negative ``n_sigma`` or ``floor``, or ``names`` that are not two strings.
    """
    if not (n_sigma >= 0 and floor >= 0):
        raise ValueError(f"n_sigma and floor must be >= 0, got n_sigma={n_sigma!r}, floor={floor!r}")
    if not (isinstance(names, tuple | list) and len(names) == 2):
        raise ValueError(f"names must be two strings, got {names!r}")
    na, nb = (str(n) for n in names)
    ea, eb = evidence_estimate(a), evidence_estimate(b)
    if check_data and None not in (ea.fingerprint, eb.fingerprint) and ea.fingerprint != eb.fingerprint:
        raise ObservedDataMismatchError(
            f"{na} and {nb} were computed on different observed data, so they are estimates of "
            "different evidences; pass check_data=False if the difference is intended"
        )
    diff = ea.log_z - eb.log_z
    combined = float(np.hypot(ea.mcse, eb.mcse))
    tol = n_sigma * combined + floor
    if not np.isfinite(combined):
        return CrossCheck(None, diff, combined, tol, None,
                          "an error is unknown (NaN), e.g. pm.sample_smc with one chain: "
                          "run more chains", ea, eb, (na, nb))  # fmt: skip
    if abs(diff) <= tol:
        reason = "the difference is within the combined error"
        if ea.flags or eb.flags:
            reason += "; a flagged estimate that agrees is still only as good as its checks say"
        return CrossCheck(True, diff, combined, tol, None, reason, ea, eb, (na, nb))
    trust, reason = _which_to_trust(ea, eb, na, nb)
    return CrossCheck(False, diff, combined, tol, trust, reason, ea, eb, (na, nb))
