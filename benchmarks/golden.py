"""Bit-identity check: fingerprints of small, seeded runs of every sampler configuration.

Refactors must not change results. ``benchmarks/golden-reference.json`` holds the fingerprints
of the code as it landed (re-taken 2026-11-26: the pm.sample_smc kernels redesigned, and the
prior sampler and posterior mapping compiled without code generation, which moved the last bit
of some transformed posterior draws; re-taken 2026-11-27 in a fresh environment, numpy 2.5.5,
scipy 1.18.1, pytensor 3.3.8, numba 0.68.0, where the previous reference differed 18/18 for
the unchanged code of 5efef05 too, and that code and the current one agree 18/18; re-taken
2026-11-28, thirteenth session: one move at τ = 1 in SMC runs with no copies left, `log Z`
identical in all 18, the posteriors of the 6 SMC configurations moved); compare a change with it, or with your own ``--write``
taken before the change:

    python benchmarks/golden.py --write benchmarks/out/golden-before.json
    python benchmarks/golden.py --compare benchmarks/out/golden-before.json
    python benchmarks/golden.py --compare benchmarks/golden-reference.json

Each configuration runs on a small model with fixed seeds (cores=1, so it is quick) and is
fingerprinted by ``log Z`` per chain (exact repr) and a SHA-256 of every numeric array of the
posterior and sample_stats groups (wall times excluded).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import warnings
from pathlib import Path

import numpy as np


SKIP_VARS = {"sampling_time", "wall_time"}


def _models():
    import pymc as pm

    rng = np.random.default_rng(0)
    y = rng.normal(1.0, 1.0, size=20)
    with pm.Model() as normal:
        mu = pm.Normal("mu", 0.0, 2.0)
        sd = pm.HalfNormal("sd", 2.0)
        pm.Normal("y", mu, sd, observed=y)
    X = rng.normal(size=(60, 3))
    yy = (rng.random(60) < 1 / (1 + np.exp(-(X @ np.array([1.0, -0.5, 0.2]))))).astype(int)
    with pm.Model() as logistic:
        b = pm.Normal("b", 0.0, 2.0, shape=3)
        pm.Bernoulli("y", logit_p=pm.math.dot(X, b), observed=yy)
    return {"normal": normal, "logistic": logistic}


def _configs():
    import pymc as pm

    import pymc_crais as pmc

    common = dict(draws=200, chains=2, cores=1, random_seed=11, progressbar=False)
    ais = dict(common, n_steps=20)
    yield "ais_linear_hmc", "normal", lambda m: pmc.sample_ais(model=m, **ais)
    yield "ais_linear_rwmh", "normal", lambda m: pmc.sample_ais(model=m, kernel="rwmh", **ais)
    yield "ais_mala", "logistic", lambda m: pmc.sample_ais(model=m, kernel="mala", **ais)
    yield "ais_imh", "logistic", lambda m: pmc.sample_ais(model=m, kernel="imh", **ais)
    yield "ais_ess", "logistic", lambda m: pmc.sample_ais(model=m, schedule="ess", **common)
    yield "ais_cess", "normal", lambda m: pmc.sample_ais(model=m, schedule="cess", **common)
    yield "ais_exp_laplace", "logistic", lambda m: pmc.sample_ais(
        model=m, schedule="exponential", init="laplace", **ais
    )
    yield "ais_alpha05", "normal", lambda m: pmc.sample_ais(model=m, alpha=0.5, **ais)
    yield "crais_default", "logistic", lambda m: pmc.sample_crais(model=m, n_steps=30, **common)
    yield "crais_alpha05", "normal", lambda m: pmc.sample_crais(
        model=m, alpha=0.5, n_steps=30, **common
    )
    yield "crais_laplace", "logistic", lambda m: pmc.sample_crais(
        model=m, init="laplace", n_steps=30, **common
    )
    yield "smc_default", "normal", lambda m: pmc.sample_smc(model=m, **common)
    yield "smc_rwmh", "logistic", lambda m: pmc.sample_smc(model=m, kernel="rwmh", **common)
    yield "smc_imh_laplace", "logistic", lambda m: pmc.sample_smc(
        model=m, kernel="imh", init="laplace", **common
    )
    yield "smc_constant_rate", "normal", lambda m: pmc.sample_smc(
        model=m, schedule="constant_rate", **common
    )
    yield "rts_default", "normal", lambda m: pmc.sample_rts(
        model=m, n_temperatures=12, n_sweeps=40, **common
    )
    pm_common = dict(draws=200, chains=2, cores=1, random_seed=11, progressbar=False)
    yield "pm_crsmc", "normal", lambda m: pm.sample_smc(model=m, kernel=pmc.CRSMC, **pm_common)
    yield "pm_batchedsmc", "logistic", lambda m: pm.sample_smc(
        model=m, kernel=pmc.BatchedSMC, **pm_common
    )


def _hash_group(tree, group: str) -> tuple[str, list[str]]:
    h = hashlib.sha256()
    names = []
    try:
        ds = tree[group]
    except KeyError:
        return "absent", names
    ds = getattr(ds, "dataset", ds)
    for name in sorted(ds.data_vars):
        if name in SKIP_VARS:
            continue
        arr = np.asarray(ds[name].values)
        if arr.dtype.kind not in "fiub":
            continue
        names.append(name)
        h.update(name.encode())
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()[:16], names


def fingerprint(idata) -> dict:
    out = {}
    ss = idata["sample_stats"]
    ss = getattr(ss, "dataset", ss)
    lml = np.asarray(ss["log_marginal_likelihood"].values)
    if lml.dtype == object:  # pm.sample_smc: ragged per-stage lists
        lml = np.array([np.asarray(v, dtype=float).ravel()[-1] for v in lml.ravel()])
    out["log_z"] = [repr(float(v)) for v in np.asarray(lml, dtype=float).ravel()]
    out["posterior"], _ = _hash_group(idata, "posterior")
    out["sample_stats"], names = _hash_group(idata, "sample_stats")
    out["sample_stats_vars"] = names
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", help="write fingerprints to this JSON file")
    p.add_argument("--compare", help="compare with fingerprints in this JSON file")
    p.add_argument("--only", nargs="*", help="configuration names to run")
    args = p.parse_args(argv)
    models = _models()
    results = {}
    for name, model_name, run in _configs():
        if args.only and name not in args.only:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                results[name] = fingerprint(run(models[model_name]))
            except Exception as exc:  # recorded, so a refactor that breaks a config shows
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}
        print(name, json.dumps(results[name]), flush=True)
    if args.write:
        Path(args.write).parent.mkdir(parents=True, exist_ok=True)
        Path(args.write).write_text(json.dumps(results, indent=1))
    if args.compare:
        ref = json.loads(Path(args.compare).read_text())
        bad = 0
        for name, fp in results.items():
            r = ref.get(name)
            same_z = r is not None and r.get("log_z") == fp.get("log_z")
            same_post = r is not None and r.get("posterior") == fp.get("posterior")
            same_ss = r is not None and r.get("sample_stats") == fp.get("sample_stats")
            status = "identical" if (same_z and same_post and same_ss) else "DIFFERENT"
            if status != "identical":
                bad += 1
                detail = f"log_z {'same' if same_z else 'differs'}, posterior "
                detail += f"{'same' if same_post else 'differs'}, sample_stats "
                detail += f"{'same' if same_ss else 'differs'}"
                if r is not None and not same_ss:
                    extra = set(fp.get("sample_stats_vars", [])) ^ set(r.get("sample_stats_vars", []))
                    if extra:
                        detail += f" (variables added/removed: {sorted(extra)})"
                print(f"{name}: {status}: {detail}")
            else:
                print(f"{name}: identical")
        print(f"{len(results) - bad} identical, {bad} different")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
