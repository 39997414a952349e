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
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

from pymc_crais.validation.applied_models import APPLIED_SPECS, reference  # noqa: E402

OUT = REPO / "pymc_crais" / "data" / "applied_references.json"


def table() -> str:
    """The stored references as a Markdown table: both ways and their difference."""
    from pymc_crais.validation import get_case

    store = json.loads(OUT.read_text())
    lines = ["| case | d | n | log Z | ref. MCSE | way 1 | way 2 | way 1 − way 2 | agree |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name in APPLIED_SPECS:
        if name not in store:
            lines.append(f"| {name} | | | not computed | | | | | |")
            continue
        r, c = store[name], get_case(name)

        def way(w):
            err = f"± {w['mcse']:.4f}" if "mcse" in w else f"(quad. err {w['error']:.0e})"
            k = f", k̂ {w['khat']:.2f}" if "khat" in w else ""
            return f"{w['log_z']:.4f} {err}{k}"

        lines.append(f"| {name} | {c.d} | {c.n} | {r['log_z']:.4f} | {r['mcse']:.4f} | "
                     f"{way(r['way1'])} | {way(r['way2'])} | {r['difference']:+.4f} | "
                     f"{'yes' if r['agree'] else 'NO'} |")  # fmt: skip
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=None, help="comma-separated names (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--table", action="store_true", help="print the stored references (Markdown)")
    args = ap.parse_args(argv)
    if args.table:
        print(table())
        return
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
