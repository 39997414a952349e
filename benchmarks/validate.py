"""Run every public sampler, with its defaults, on the evidence validation suite.

    python benchmarks/validate.py [--cases a,b | --cases quick|exact|reference|all|applied]
        [--samplers smc,crais,ais,rts,pm_smc,pm_batched,pm_crsmc,pm_crais,bridge] [--chains 4]
        [--draws N] [--seed 1]
        [--quick] [--timeout 900] [--json PATH] [--markdown] [--results PATH] [--no-run] [--list]
        [--speed] [--init prior|laplace|auto] [--kwargs '{"alpha": 0.5}'] [--warm-session]

Cases: ``pymc_crais.validation`` (``benchmarks/reports/validation.md`` lists them). Samplers, each called
as a user would, with only the model, ``random_seed``, ``chains``, ``cores=1`` and
``progressbar=False`` given (plus ``draws`` with ``--draws``/``--quick``; ``init`` with
``--init``, to compare starts, which ``pm_smc`` ignores; and any sampler options given as JSON
with ``--kwargs``; both are recorded in the results and part of their key):

* ``smc``: ``pmc.sample_smc()``; ``smc_ps``: ``pmc.sample_smc(persistent=True)``
  (persistent sampling; only when named in ``--samplers``); ``smc_nc``:
  ``pmc.sample_smc(reparameterize="noncentred")`` (only when named); ``smc_numba``:
  ``pmc.sample_smc(backend="numba")`` (Numba from the start, no NumPy stage; only when
  named); ``crais``: ``pmc.sample_crais()``; ``ais``:
  ``pmc.sample_ais()``; ``rts``: ``pmc.sample_rts()``;
* ``pm_smc``: ``pm.sample_smc()`` (PyMC's default IMH kernel, subclassed only to count model
  evaluations as ``benchmarks/bench_accuracy_cost.py`` does);
* ``pm_batched``, ``pm_crsmc``, ``pm_crais``: ``pm.sample_smc(kernel=pmc.BatchedSMC)``,
  ``kernel=pmc.CRSMC`` and ``kernel=pmc.CRAIS``, PyMC's driver and defaults with our kernels
  (model evaluations: each chain's ``n_logp_evals`` plus the run-level pilot, tuning and
  Laplace evaluations).
* ``bridge``: ``pm.sample()`` (NUTS, its defaults but ``chains``, ``cores=1``,
  ``random_seed``, ``progressbar=False``; ``draws`` with ``--draws``), then
  ``pmc.bridge_sampling()`` with its defaults on the result; the wall time is both together,
  recorded apart as ``nuts_wall_s`` and ``bridge_wall_s``; evaluations are NUTS's leapfrog
  steps after tuning (``n_steps``, each a gradient) plus the bridge's log-densities. Models
  with discrete variables are refused by ``bridge_sampling`` before any sampling.

Each (case, sampler) runs in its own subprocess with a wall-clock limit (``--timeout``), so
a slow or hanging run is killed and recorded as ``timeout``. For each run the table gives:
the error ``log Z − reference``; the reported MCSE (``pmc.log_marginal_likelihood`` on the
result; for ``pm.sample_smc`` the same combination of its chains' last
``log_marginal_likelihood``, between-chain error only); error/MCSE; every warning raised
during the sampler call and the combination (class names, counted; any
``UnreliableEvidenceWarning`` is marked); wall time (contended machine, includes
compilation); model evaluations (our samplers' ``n_logp_evals`` summed over chains plus
pilot/tuning/Laplace evaluations and the posterior refit check's, a discarded first run
included; PyMC: counted). A run *misses* when
``|error| > 3 · sqrt(MCSE² + MCSE_ref²)`` (``MCSE_ref`` the reference's own, 0 when exact) or
``|error|`` exceeds 0.1 nat (exact reference) / 0.3 nat (reference
case) plus 3 × the reference's own MCSE; a miss without an ``UnreliableEvidenceWarning`` is
*silent*.

``--warm-session``: before the timer starts, the worker makes one small call of *both*
``pmc.sample_smc`` and ``pm.sample_smc`` (50 particles, 1 chain) on a one-parameter model,
whichever sampler it then times: the wall time is then what a call on a new model costs in
a session that has already sampled (a notebook comparing models), without the one-time
costs of a process's first call (imports such as ``scipy.stats``, ``arviz_base`` and the
``jax`` it probes, PyTensor's Numba dispatch, the first ArviZ output), paid alike by both
packages. Compilation of the case's model is still timed. Keep such runs in their own
``--results`` file (the flag is not part of the key).

For ``pmc.sample_smc`` the record's ``chains_only`` keeps the chains' own ``log Z`` and
MCSE and whether the posterior refit check's estimate was pooled into the reported one.

Raw results accumulate in ``--results`` (default ``benchmarks/out/validate.json``; a run
already there with the same settings is skipped, so the suite can be run in chunks); the
table is printed, and written as JSON (``--json``) or Markdown (``--markdown``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import ClassVar

import numpy as np

REPO = Path(__file__).resolve().parents[1]

SAMPLERS = ("smc", "crais", "ais", "rts", "pm_smc", "pm_batched", "pm_crsmc", "pm_crais", "bridge")
OPTIONAL_SAMPLERS = ("smc_ps", "smc_nc", "smc_numba")  # run only when named in --samplers
LABELS = {
    "smc": "pmc.sample_smc",
    "smc_ps": "pmc.sample_smc(persistent=True)",
    "smc_nc": "pmc.sample_smc(reparameterize='noncentred')",
    "smc_numba": "pmc.sample_smc(backend='numba')",
    "crais": "pmc.sample_crais",
    "ais": "pmc.sample_ais",
    "rts": "pmc.sample_rts",
    "pm_smc": "pm.sample_smc",
    "pm_batched": "pm.sample_smc(kernel=pmc.BatchedSMC)",
    "pm_crsmc": "pm.sample_smc(kernel=pmc.CRSMC)",
    "pm_crais": "pm.sample_smc(kernel=pmc.CRAIS)",
    "bridge": "NUTS + pmc.bridge_sampling",
}
DROP_INS = {"pm_batched": "BatchedSMC", "pm_crsmc": "CRSMC", "pm_crais": "CRAIS"}
TOL = {"exact": 0.1, "reference": 0.3}
QUICK_DRAWS = 256


# ----------------------------------------------------------------------------- worker


def _counting_imh():
    from pymc.smc.kernels import IMH

    class CountingIMH(IMH):
        counts: ClassVar[list] = []

        def _initialize_kernel(self):
            super()._initialize_kernel()
            type(self).counts.append(self.draws)

        def mutate(self):
            super().mutate()
            type(self).counts[-1] += (self.n_steps - 1) * self.draws

    CountingIMH.counts = []
    return CountingIMH


INIT_ATTRS = ("init", "init_choice", "init_reason", "init_pareto_k", "init_n_modes",
              "init_annealed_pareto_k", "init_annealed_pareto_k_wide", "init_annealed_stages",
              "n_logp_evals_annealed_start", "init_conditional_copies", "init_conditional_relvar",
              "init_conditional_pareto_k", "init_conditional_pareto_k_refit",
              "init_conditional_between", "init_conditional_within",
              "init_conditional_predicted_mcse", "init_conditional_splits",
              "n_logp_evals_conditional_start")  # fmt: skip


def _plain(v):
    return v.item() if hasattr(v, "item") else v


def _our_evals(idata) -> int:
    st = idata["sample_stats"]
    extra = ("n_logp_evals_tune", "n_logp_evals_pilot", "n_logp_evals_laplace", "n_logp_evals_refit")
    return int(np.sum(st["n_logp_evals"].values)) + sum(int(st.attrs.get(k, 0)) for k in extra)


def _warm_session() -> None:
    """One small call of each package's SMC on a one-parameter model (``--warm-session``)."""
    import warnings

    import pymc as pm

    import pymc_crais as pmc

    with pm.Model() as toy:
        a = pm.Normal("a")
        pm.Normal("y", a, observed=np.zeros(2))
    kw = {"model": toy, "draws": 50, "chains": 1, "cores": 1, "progressbar": False, "random_seed": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pmc.sample_smc(**kw)
        pm.sample_smc(**kw)


def _run_bridge(model, kw: dict, rec: dict, discrete: bool):
    """NUTS (``pm.sample``) then ``pmc.bridge_sampling``; times and diagnostics into ``rec``."""
    import pymc as pm
    from arviz_base import from_dict

    import pymc_crais as pmc

    kw = {k: v for k, v in kw.items() if k != "model"}
    if discrete:  # refused before any sampling: no NUTS run is wasted on it
        pmc.bridge_sampling(from_dict({"posterior": {}}), model)
    t0 = time.perf_counter()
    with model:
        idata = pm.sample(**kw)
    t1 = time.perf_counter()
    out = pmc.bridge_sampling(idata, model, random_seed=kw["random_seed"])
    rec["nuts_wall_s"], rec["bridge_wall_s"] = t1 - t0, time.perf_counter() - t1
    log_z, mcse = pmc.log_marginal_likelihood(out)
    ev = out["evidence"]
    rec["bridge"] = {k: _plain(ev[k].values) for k in ev.data_vars}
    rec["bridge"].update({k: _plain(ev.attrs[k]) for k in ("flags", "proposal", "warp")})
    nuts_evals = int(np.sum(idata["sample_stats"]["n_steps"].values))
    return log_z, mcse, nuts_evals + int(ev["n_logp_evals"].values)


def run_one(
    case_name: str, sampler: str, chains: int, seed: int, draws: int | None,
    init: str | None = None, kwargs: dict | None = None, warm_session: bool = False,
) -> dict:
    """One sampler call on one case, in this process; returns the record."""
    import warnings

    if warm_session:
        _warm_session()

    import pymc as pm

    import pymc_crais as pmc
    from pymc_crais.validation import get_case

    inst = get_case(case_name).build()
    model = inst.model
    kw = {"model": model, "random_seed": seed, "chains": chains, "cores": 1, "progressbar": False}
    if draws is not None:
        kw["draws"] = draws
    if init is not None and sampler not in ("pm_smc", "bridge"):
        kw["init"] = init
    kw.update(kwargs or {})
    rec = {"init": init, "case": case_name, "sampler": sampler, "chains": chains, "seed": seed, "draws": draws,
           "reference": inst.log_z, "reference_mcse": inst.log_z_mcse}  # fmt: skip
    if kwargs:
        rec["kwargs"] = kwargs
    if warm_session:
        rec["warm_session"] = True
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if sampler == "bridge":
                log_z, mcse, evals = _run_bridge(model, kw, rec, get_case(case_name).discrete)
                per_chain = np.array([log_z])
            elif sampler == "pm_smc":
                kern = _counting_imh()
                idata = pm.sample_smc(kernel=kern, **kw)
                lml = idata["sample_stats"]["log_marginal_likelihood"].values
                per_chain = []
                for row in lml:
                    row = np.asarray(row, dtype=float).ravel()
                    row = row[np.isfinite(row)]
                    per_chain.append(float(row[-1]) if row.size else np.nan)
                per_chain = np.array(per_chain)
                # pm.sample_smc's own result: a 1-D (chain,) Dataset without MCSEs would read
                # as one pm.sample_smc chain's per-stage values
                log_z, mcse = pmc.log_marginal_likelihood(idata)
                evals = int(sum(kern.counts))
            elif sampler in DROP_INS:
                idata = pm.sample_smc(kernel=getattr(pmc, DROP_INS[sampler]), **kw)
                log_z, mcse = pmc.log_marginal_likelihood(idata)
                st = idata["sample_stats"]
                per_chain = np.array(
                    [np.asarray(v, float)[-1] for v in st["log_marginal_likelihood"].values]
                )
                extra = ("n_logp_evals_tune", "n_logp_evals_pilot", "n_logp_evals_laplace", "n_logp_evals_refit")
                evals = int(sum(np.asarray(v, float)[-1] for v in st["n_logp_evals"].values))
                evals += sum(int(st.attrs.get(k, 0)) for k in extra)
                rec["init_used"] = {k: _plain(st.attrs[k]) for k in INIT_ATTRS if k in st.attrs}
            else:
                fn = {"smc": pmc.sample_smc, "crais": pmc.sample_crais, "ais": pmc.sample_ais,
                      "rts": pmc.sample_rts, "smc_ps": pmc.sample_smc, "smc_nc": pmc.sample_smc, "smc_numba": pmc.sample_smc}[sampler]  # fmt: skip
                own = {"smc_ps": {"persistent": True}, "smc_nc": {"reparameterize": "noncentred"},
                       "smc_numba": {"backend": "numba"}}  # fmt: skip
                idata = fn(**kw, **own.get(sampler, {}))
                log_z, mcse, det = pmc.log_marginal_likelihood(idata, return_details=True)
                per_chain = np.asarray(
                    idata["sample_stats"]["log_marginal_likelihood"].values, float
                )
                # the chains' own estimate, before pooling with the refit check's
                rec["chains_only"] = {k: _plain(det.get(k)) for k in
                                      ("log_z_chains_pooled", "mcse_chains_pooled", "refit_pooled")}  # fmt: skip
                evals = _our_evals(idata)
                sattrs = idata["sample_stats"].attrs
                rec["init_used"] = {k: _plain(sattrs[k]) for k in INIT_ATTRS if k in sattrs}
                rec["refit"] = {k: _plain(v) for k, v in sattrs.items() if k.startswith("refit_")}
            rec.update(status="ok", log_z=float(log_z), mcse=float(mcse),
                       log_z_chains=[float(v) for v in np.ravel(per_chain)], evals=evals)  # fmt: skip
        except Exception as exc:  # noqa: BLE001 (recorded, the suite goes on)
            rec.update(status="error", error_type=type(exc).__name__, error_message=str(exc)[:500],
                       traceback=traceback.format_exc()[-2000:])  # fmt: skip
    rec["wall_s"] = time.perf_counter() - t0
    rec["warnings"] = [
        {"category": w.category.__name__, "message": str(w.message)[:300]} for w in caught
    ]
    return rec


# ----------------------------------------------------------------------------- parent


def _key(rec_or_args) -> str:
    r = rec_or_args
    key = f"{r['case']}|{r['sampler']}|chains={r['chains']}|seed={r['seed']}|draws={r['draws']}"
    if r.get("init") is not None:
        key += f"|init={r['init']}"
    if r.get("kwargs"):
        key += "|kwargs=" + json.dumps(r["kwargs"], sort_keys=True)
    return key


def _kwargs(args) -> dict | None:
    """The ``--kwargs`` JSON as a dict (``None`` when not given)."""
    if not getattr(args, "kwargs", None):
        return None
    kw = json.loads(args.kwargs)
    if not isinstance(kw, dict):
        raise ValueError(f"--kwargs must be a JSON object, got {args.kwargs!r}")
    return kw


def run_in_subprocess(case, sampler, args, draws) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    cmd = [sys.executable, "-W", "ignore::DeprecationWarning", str(Path(__file__).resolve()),
           "--_worker", case, sampler, out, "--chains", str(args.chains), "--seed", str(args.seed)]  # fmt: skip
    if draws is not None:
        cmd += ["--draws", str(draws)]
    if args.init is not None:
        cmd += ["--init", args.init]
    if args.kwargs:
        cmd += ["--kwargs", args.kwargs]
    if args.warm_session:
        cmd += ["--warm-session"]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, text=True)  # fmt: skip
    try:
        log, _ = proc.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        Path(out).unlink(missing_ok=True)
        return {"case": case, "sampler": sampler, "chains": args.chains, "seed": args.seed,
                "draws": draws, "init": args.init, "kwargs": _kwargs(args), "status": "timeout", "wall_s": time.perf_counter() - t0,
                "warnings": []}  # fmt: skip
    try:
        rec = json.loads(Path(out).read_text())
    except (OSError, json.JSONDecodeError):
        rec = {"case": case, "sampler": sampler, "chains": args.chains, "seed": args.seed,
               "draws": draws, "init": args.init, "kwargs": _kwargs(args), "status": "crash", "error_type": f"exit {proc.returncode}",
               "error_message": (log or "")[-500:], "wall_s": time.perf_counter() - t0,
               "warnings": []}  # fmt: skip
    Path(out).unlink(missing_ok=True)
    return rec


def classify(rec: dict, reference_type: str) -> dict:
    """Add error, error/MCSE, miss and silent-miss flags and the warning summary."""
    counts = Counter(w["category"] for w in rec.get("warnings", []))
    rec["warning_counts"] = dict(counts)
    rec["unreliable_warned"] = "UnreliableEvidenceWarning" in counts
    if rec.get("status") != "ok":
        rec["miss"] = None
        return rec
    err = rec["log_z"] - rec["reference"]
    rec["error"] = err
    rec["z"] = err / rec["mcse"] if rec["mcse"] > 0 else float("inf")
    ref_mcse = rec.get("reference_mcse", 0.0)
    # the error is measured against a reference with its own Monte Carlo error (0 when
    # exact): the 3-sigma test uses both, sqrt(MCSE² + MCSE_ref²)
    sd = float(np.hypot(rec["mcse"], ref_mcse))
    rec["z_with_reference"] = err / sd if sd > 0 else float("inf")
    tol = TOL[reference_type] + 3 * ref_mcse
    why = [
        w
        for w, bad in (
            (">3 MCSE", not abs(rec["z_with_reference"]) <= 3),
            (f">{tol:.2g} nat", not abs(err) <= tol),
        )
        if bad
    ]
    rec["miss_reason"] = " & ".join(why)
    rec["miss"] = bool(why)
    rec["silent_miss"] = bool(rec["miss"] and not rec["unreliable_warned"])
    return rec


def _fmt_warn(counts: dict) -> str:
    if not counts:
        return ""
    return ", ".join(f"{k}×{v}" if v > 1 else k for k, v in sorted(counts.items()))


def table_rows(recs: list[dict]) -> list[list[str]]:
    from pymc_crais.validation import get_case

    rows = []
    for r in recs:
        c = get_case(r["case"])
        base = [r["case"], c.reference, LABELS[r["sampler"]]]
        if r.get("status") == "ok":
            miss = r.get("miss_reason", "")
            rows.append(base + [f"{r['error']:+.3f}", f"{r['mcse']:.3f}", f"{r['z']:+.1f}", miss,
                                _fmt_warn(r["warning_counts"]), f"{r['wall_s']:.0f}",
                                f"{r['evals']:.3g}"])  # fmt: skip
        else:
            what = r["status"]
            if r.get("error_type"):
                what += f": {r['error_type']}: {r.get('error_message', '')[:80]}"
            rows.append(base + [what.replace("|", "/").replace("\n", " "), "", "", "",
                                _fmt_warn(r.get("warning_counts", {})), f"{r['wall_s']:.0f}", ""])  # fmt: skip
    return rows


HEADER = ["case", "ref", "sampler", "error", "MCSE", "err/MCSE", "miss", "warnings", "wall s",
          "evals"]  # fmt: skip


def markdown(recs: list[dict]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(recs)]
    return "\n".join(lines)


def text_table(recs: list[dict]) -> str:
    rows = [HEADER] + table_rows(recs)
    widths = [min(max(len(r[i]) for r in rows), 60) for i in range(len(HEADER))]
    return "\n".join(
        "  ".join(c[:60].ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows
    )


def summary(recs: list[dict]) -> str:
    out = []
    for s in SAMPLERS + OPTIONAL_SAMPLERS:
        rs = [r for r in recs if r["sampler"] == s]
        if not rs:
            continue
        ok = [r for r in rs if r.get("status") == "ok"]
        miss = [r["case"] for r in ok if r["miss"]]
        silent = [r["case"] for r in ok if r.get("silent_miss")]
        bare = [r["case"] for r in ok if r["miss"] and not r.get("warning_counts")]
        warned = [r["case"] for r in rs if r.get("warning_counts")]
        failed = [f"{r['case']} ({r['status']})" for r in rs if r.get("status") != "ok"]
        out.append(
            f"{LABELS[s]}: {len(ok)}/{len(rs)} ran; misses {len(miss)}: {', '.join(miss) or '-'}; "
            f"misses without UnreliableEvidenceWarning {len(silent)}, without any warning "
            f"{len(bare)}; runs with warnings {len(warned)}: "
            f"{', '.join(warned) or '-'}; failed: {', '.join(failed) or '-'}"
        )
    return "\n".join(out)


SPEED_TARGETS = (("n < 200 rows", 20.0), ("Pima-sized (n >= 200, d <= 20)", 5.0),
                 ("Sonar-sized (d > 20)", 2.0))  # fmt: skip


def size_class(case) -> str:
    """The speed target class of a case (issue "defaults that win")."""
    if case.n < 200 and case.d <= 20:
        return SPEED_TARGETS[0][0]
    if case.d <= 20:
        return SPEED_TARGETS[1][0]
    return SPEED_TARGETS[2][0]


def _speed_rows(recs: list[dict]) -> list[dict]:
    """One row per (case, our sampler) that has a pm.sample_smc record in ``recs``."""
    from pymc_crais.validation import get_case

    by = {(r["case"], r["sampler"]): r for r in recs if r.get("status") == "ok"}
    targets = dict(SPEED_TARGETS)
    rows = []
    for (case, s), r in by.items():
        pm = by.get((case, "pm_smc"))
        if s == "pm_smc" or pm is None:
            continue
        c = get_case(case)
        cls = size_class(c)
        speed = pm["wall_s"] / r["wall_s"]
        tol = TOL[c.reference] + 3 * r.get("reference_mcse", 0.0)
        ok_err = abs(r["error"]) <= max(abs(pm["error"]), tol)
        rows.append({"case": case, "sampler": s, "cls": cls, "target": targets[cls], "r": r,
                     "pm": pm, "speed": speed, "ok_err": ok_err,
                     "meets": ok_err and speed >= targets[cls]})  # fmt: skip
    return rows


def speed_table(recs: list[dict]) -> str:
    """Defaults against defaults: wall-time ratio pm.sample_smc / ours, per case and sampler.

    Only cases where both ran in the same store; the ratio includes compilation on both sides.
    ``no worse`` is |error| <= max(|error of pm.sample_smc|, tolerance).
    """
    lines = ["| case | class (target) | sampler | wall s | pm wall s | speed-up | evals ratio "
             "| error | pm error | no worse | meets target |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for w in _speed_rows(recs):
        r, pm = w["r"], w["pm"]
        lines.append(
            f"| {w['case']} | {w['cls']} (≥{w['target']:g}×) | {LABELS[w['sampler']]} | "
            f"{r['wall_s']:.1f} | {pm['wall_s']:.1f} | {w['speed']:.1f}× | "
            f"{pm['evals'] / r['evals']:.2f} | {r['error']:+.3f} | {pm['error']:+.3f} | "
            f"{'yes' if w['ok_err'] else 'NO'} | {'yes' if w['meets'] else 'NO'} |"
        )
    return "\n".join(lines)


def speed_summary(recs: list[dict]) -> str:
    """Per size class and sampler: cases, median and range of the speed-up, and the cases
    that meet the target (the rest listed with their speed-up and wall times)."""
    rows = _speed_rows(recs)
    lines = ["| size class (target) | sampler | cases | median speed-up | range | meets target |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for cls, target in SPEED_TARGETS:
        for s in dict.fromkeys(w["sampler"] for w in rows):
            group = [w for w in rows if w["cls"] == cls and w["sampler"] == s]
            if not group:
                continue
            sp = np.array([w["speed"] for w in group])
            misses = [w for w in group if not w["meets"]]
            met = f"{len(group) - len(misses)} of {len(group)}"
            if misses and len(misses) <= 3:
                met += "; not " + ", ".join(
                    f"`{w['case']}` {w['speed']:.2f}× ({w['r']['wall_s']:.1f} s vs "
                    f"{w['pm']['wall_s']:.1f} s)" for w in misses
                )
            lines.append(
                f"| {cls} (≥ {target:g}×) | {LABELS[s]} | {len(group)} | "
                f"{np.median(sp):.1f}× | {sp.min():.1f}–{sp.max():.1f}× | {met} |"
            )
    return "\n".join(lines)


def relative_summary(recs: list[dict], base: str = "smc") -> str:
    """Per sampler: runs, misses (silent), misses on unimodal cases, and the median over
    cases of its wall time and model evaluations divided by ``base``'s on the same case
    (``--against smc``: the drop-in kernels' cost target is within 2x of pmc.sample_smc),
    and the same medians of the cost at equal error, wall × MCSE² and evaluations × MCSE²
    (below 1: cheaper than ``base`` for the same Monte Carlo error; cases where either
    MCSE is not finite are left out)."""
    from pymc_crais.validation import get_case

    by = {(r["case"], r["sampler"]): r for r in recs if r.get("status") == "ok"}
    lines = [f"| sampler | runs | misses (silent) | unimodal misses | median wall / {base} "
             f"| median evals / {base} | wall ≤ 2× {base} | median wall·MCSE² / {base} "
             f"| median evals·MCSE² / {base} |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for s in dict.fromkeys(r["sampler"] for r in recs):
        mine = [r for r in recs if r["sampler"] == s]
        ok = [r for r in mine if r.get("status") == "ok"]
        miss = [r for r in ok if r.get("miss")]
        silent = [r for r in miss if r.get("silent_miss")]
        uni = [r for r in miss if get_case(r["case"]).modality == "unimodal"]
        pairs = [(r, by[(r["case"], base)]) for r in ok if (r["case"], base) in by]
        wall = np.array([r["wall_s"] / b["wall_s"] for r, b in pairs])
        ev = np.array([r["evals"] / b["evals"] for r, b in pairs])
        within = f"{int(np.sum(wall <= 2))} of {wall.size}" if wall.size else ""
        sq = [((r["mcse"] or np.nan) / (b["mcse"] or np.nan)) ** 2 for r, b in pairs]
        fin = np.isfinite(sq)
        eff_w = np.median((wall * sq)[fin]) if fin.any() else np.nan
        eff_e = np.median((ev * sq)[fin]) if fin.any() else np.nan
        other = len(mine) - len(ok)
        runs = f"{len(ok)}" + (f" (+{other} not finished)" if other else "")
        lines.append(
            f"| {LABELS[s]} | {runs} | {len(miss)} ({len(silent)}) | {len(uni)} | "
            f"{np.median(wall):.2f} | {np.median(ev):.3g} | {within} | {eff_w:.2f} | {eff_e:.2f} |"
            if wall.size
            else f"| {LABELS[s]} | {runs} | {len(miss)} ({len(silent)}) | {len(uni)} | | | | | |"
        )
    return "\n".join(lines)


def case_table() -> str:
    """The suite's cases with their tags and references, as Markdown."""
    from pymc_crais.validation import cases

    lines = ["| case | family | modes | d | n | reference | log Z | ref. MCSE | how | description |",
             "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for c in cases():
        try:
            inst = c.build()
        except KeyError:  # a reference case whose reference is not computed yet
            lines.append(f"| {c.name} | {c.family} | {c.modality} | {c.d} | {c.n} | {c.reference} "
                         f"| not computed | | | {c.description} |")  # fmt: skip
            continue
        how = inst.method.replace("|", "/")
        lines.append(f"| {c.name} | {c.family} | {c.modality} | {c.d} | {c.n} | {c.reference} | "
                     f"{inst.log_z:.4f} | {inst.log_z_mcse:.4f} | {how} | {c.description} |")  # fmt: skip
    return "\n".join(lines)


def select_cases(spec: str | None, quick: bool) -> list[str]:
    from pymc_crais.validation import QUICK, cases

    if spec is None:
        spec = "quick" if quick else "all"
    if spec == "quick":
        return list(QUICK)
    if spec == "all":
        return [c.name for c in cases()]
    if spec in ("exact", "reference"):
        return [c.name for c in cases(reference=spec)]
    if spec == "applied":  # the applied tier (pymc_crais/validation/applied_models.py)
        return [c.name for c in cases(tier="applied")]
    return [s.strip() for s in spec.split(",") if s.strip()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--cases", default=None, help="comma-separated names, or quick/exact/reference/all/applied"
    )
    ap.add_argument("--samplers", default=",".join(SAMPLERS))
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=None, help="particles (default: each sampler's)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help=f"the QUICK cases, {QUICK_DRAWS} draws")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per (case, sampler)")
    ap.add_argument("--results", default=str(REPO / "benchmarks" / "out" / "validate.json"))
    ap.add_argument("--json", default=None, help="write this run's records here")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--rerun", action="store_true", help="ignore stored results")
    ap.add_argument("--no-run", action="store_true", help="only tabulate stored results")
    ap.add_argument("--list", action="store_true", help="print the cases as a Markdown table")
    ap.add_argument("--against", default=None, metavar="SAMPLER",
                    help="print each sampler's misses and median wall/evals ratios to SAMPLER")
    ap.add_argument("--speed", action="store_true",
                    help="also print wall-time ratios against pm.sample_smc (defaults)")
    ap.add_argument("--init", default=None, help="init= for our samplers (default: theirs)")
    ap.add_argument("--kwargs", default=None,
                    help='sampler options as a JSON object, e.g. \'{"alpha": 0.5}\'')  # fmt: skip
    ap.add_argument("--warm-session", action="store_true",
                    help="one small call of both packages' SMC before timing (module docstring)")
    ap.add_argument("--_worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.list:
        print(case_table())
        return

    if args._worker:
        case, sampler, out = args._worker
        rec = run_one(case, sampler, args.chains, args.seed, args.draws, args.init, _kwargs(args),
                      args.warm_session)
        Path(out).write_text(json.dumps(rec))
        return

    from pymc_crais.validation import get_case, load_references

    draws = args.draws if args.draws is not None else (QUICK_DRAWS if args.quick else None)
    names = select_cases(args.cases, args.quick)
    samplers = [s.strip() for s in args.samplers.split(",")]
    for s in samplers:
        if s not in SAMPLERS + OPTIONAL_SAMPLERS:
            known = ", ".join(SAMPLERS + OPTIONAL_SAMPLERS)
            ap.error(f"--samplers: unknown sampler {s!r}; choose from {known}")
    for n in names:
        get_case(n)  # fails early on a typo
    store_path = Path(args.results)
    store = json.loads(store_path.read_text()) if store_path.exists() else {}
    recs = []
    for name in names:
        ref_type = get_case(name).reference
        for s in samplers:
            key = _key({"case": name, "sampler": s, "chains": args.chains, "seed": args.seed,
                        "draws": draws, "init": args.init, "kwargs": _kwargs(args)})  # fmt: skip
            if key in store and not args.rerun:
                rec = store[key]
            elif args.no_run:
                continue
            else:
                rec = run_in_subprocess(name, s, args, draws)
                rec["loadavg"] = list(os.getloadavg())
                store[key] = rec
                store_path.parent.mkdir(parents=True, exist_ok=True)
                store_path.write_text(json.dumps(store, indent=1) + "\n")
            stored = load_references().get(name) if ref_type == "reference" else None
            if stored is not None and rec.get("status") == "ok":  # the current reference
                rec["reference"], rec["reference_mcse"] = stored["log_z"], stored["mcse"]
            rec = classify(rec, ref_type)
            recs.append(rec)
            if not args.no_run:
                print("  ".join(table_rows([rec])[0]), flush=True)
    if not args.no_run:  # the last record's classification (error, miss) goes to the store too
        store_path.parent.mkdir(parents=True, exist_ok=True)
        store_path.write_text(json.dumps(store, indent=1) + "\n")
    print()
    print(markdown(recs) if args.markdown else text_table(recs))
    print()
    print(summary(recs))
    if args.against:
        print(relative_summary(recs, args.against))
    if args.speed:
        print()
        print(speed_table(recs))
        print()
        print(speed_summary(recs))
    if args.json:
        Path(args.json).write_text(json.dumps(recs, indent=1) + "\n")


if __name__ == "__main__":
    main()
