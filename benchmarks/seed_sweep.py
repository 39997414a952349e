"""``pmc.sample_smc()`` (defaults, 4 chains, ``cores=1``) on one validation case over many
seeds, in one process: the error against the case's reference, the MCSE, the start's copies
and the wall time per seed (the first seed pays the compilation).

    python benchmarks/seed_sweep.py --case applied_ar1 --seeds 11,13,14,15 [--json PATH]

For a precision claim over seeds ("MCSE ≤ 0.05 at every seed tried"); accuracy over models is
``benchmarks/validate.py``'s job.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", required=True)
    ap.add_argument("--seeds", required=True, help="comma-separated")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import pymc_crais as pmc
    from pymc_crais.validation import get_case

    inst = get_case(args.case).build()
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            idata = pmc.sample_smc(model=inst.model, random_seed=seed, chains=4, cores=1,
                                   progressbar=False)  # fmt: skip
        wall = time.perf_counter() - t0
        log_z, mcse = pmc.log_marginal_likelihood(idata)
        attrs = idata["sample_stats"].attrs
        flagged = any(w.category.__name__ == "UnreliableEvidenceWarning" for w in caught)
        row = {"seed": seed, "error": log_z - inst.log_z, "mcse": mcse, "wall_s": wall,
               "init_choice": attrs.get("init_choice"), "flagged": flagged,
               "copies": attrs.get("init_conditional_copies")}  # fmt: skip
        rows.append(row)
        flag = ", flagged" if flagged else ""
        print(f"{args.case} seed {seed}: {row['error']:+.4f} ± {mcse:.4f}, {wall:.1f} s, "
              f"start {row['init_choice']} (copies {row['copies']}){flag}", flush=True)
    worst = max(r["mcse"] for r in rows)
    print(f"{len(rows)} seeds: MCSE at most {worst:.4f}; above 0.05 at "
          f"{sum(r['mcse'] > 0.05 for r in rows)}; |error| > 3 MCSE at "
          f"{sum(abs(r['error']) > 3 * r['mcse'] for r in rows)}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"case": args.case, "reference": inst.log_z, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
