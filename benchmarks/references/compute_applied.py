"""Compute the two-way references of the applied tier (``pymc_crais.validation.applied_models``).

    nice -n 10 python benchmarks/references/compute_applied.py [--cases a,b] [--seed 0]

No SMC or AIS: linear-Gaussian models by quadrature of the analytic marginal over their
hyperparameters, cross-checked by importance sampling with a dense-covariance marginal;
the others by importance sampling on the model's joint density from two proposals. Merges
the results (both ways, their difference, timings) into
``pymc_crais/data/applied_references.json``, which the suite reads.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from pymc_crais.validation.applied_models import APPLIED_SPECS, reference  # noqa: E402

OUT = REPO / "pymc_crais" / "data" / "applied_references.json"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=None, help="comma-separated names (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    names = args.cases.split(",") if args.cases else list(APPLIED_SPECS)
    store = json.loads(OUT.read_text()) if OUT.exists() else {}
    for name in names:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = reference(name, seed=args.seed)
        res["seconds"] = round(time.perf_counter() - t0, 1)
        res["command"] = f"python benchmarks/references/compute_applied.py --cases {name} --seed {args.seed}"
        store[name] = res
        print(f"{name}: {res['method']}  diff {res['difference']:+.4f}  agree {res['agree']}  "
              f"({res['seconds']} s)", flush=True)
        OUT.write_text(json.dumps(dict(sorted(store.items())), indent=1) + "\n")


if __name__ == "__main__":
    main()
