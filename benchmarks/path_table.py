"""Tables of ``benchmarks/validate.py`` results that compare two settings at equal cost.

    python benchmarks/path_table.py [--results benchmarks/out/ma_path.json]
        [--sampler smc] [--base '{"path": "geometric"}'] [--other '{"path": "moment_averaging"}']
    python benchmarks/path_table.py --results benchmarks/out/thermodynamic.json --all

``--all``: every (sampler, options) per (case, init), with ``MCSE² × evaluations`` relative to
the smallest of the group.

For each (case, init) run with both ``--kwargs`` settings: the error against the reference,
the reported MCSE, the model evaluations (all of them: chains, pilots, Laplace fits) and the
*work-normalized variance* ``MCSE² × evaluations``, the variance a run of one evaluation
would have if the error fell as ``1/√cost``; its ratio other/base below 1 means the other
setting is better at equal cost. With 4 chains the MCSE is itself uncertain by about ±40 %
(t-inflated between-chain term), so ratios within 0.5–2 are not differences.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _kw_key(kw) -> str:
    return json.dumps(kw or {}, sort_keys=True)


def table(results: dict, sampler: str, base: dict, other: dict) -> str:
    rows = {}
    for rec in results.values():
        if rec.get("sampler") != sampler:
            continue
        k = _kw_key(rec.get("kwargs"))
        side = "base" if k == _kw_key(base) else "other" if k == _kw_key(other) else None
        if side:
            rows.setdefault((rec["case"], str(rec.get("init"))), {})[side] = rec
    head = (
        "| case | init | base error | base MCSE | base evals | other error | other MCSE | "
        "other evals | MCSE²·evals other / base |\n|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]

    def cell(r):
        if r.get("status") != "ok":
            return [r.get("status", "?"), "", ""]
        err, missed = _error(r)
        miss = " (miss)" if missed else ""
        return [f"{err:+.3f}{miss}", f"{r['mcse']:.3f}", f"{r['evals']:.3g}"]

    for (case, init), pair in sorted(rows.items(), key=lambda t: (t[0][1], t[0][0])):
        if set(pair) != {"base", "other"}:
            continue
        b, o = pair["base"], pair["other"]
        ratio = ""
        if b.get("status") == o.get("status") == "ok" and b["mcse"] > 0:
            ratio = f"{(o['mcse'] ** 2 * o['evals']) / (b['mcse'] ** 2 * b['evals']):.2f}"
        lines.append("| " + " | ".join([case, init, *cell(b), *cell(o), ratio]) + " |")
    return "\n".join(lines)


def _error(r) -> tuple[float, bool]:
    err = r["log_z"] - r["reference"]
    ref = r.get("reference_mcse", 0.0)
    nat = (0.1 if ref == 0.0 else 0.3) + 3 * ref
    return err, bool(abs(err) > 3 * r["mcse"] or abs(err) > nat)  # validate.py's miss rule


def listing(results: dict) -> str:
    """Every run per (case, init): error, MCSE, evaluations, relative MCSE² × evaluations."""
    groups = {}
    for rec in results.values():
        groups.setdefault((str(rec.get("init")), rec["case"]), []).append(rec)
    lines = [
        "| case | init | sampler (options) | error | MCSE | evals | MCSE²·evals / best |",
        "|---|---|---|---|---|---|---|",
    ]
    for (init, case), recs in sorted(groups.items()):
        ok = [r for r in recs if r.get("status") == "ok" and r.get("mcse", 0) > 0]
        best = min((r["mcse"] ** 2 * r["evals"] for r in ok), default=float("nan"))
        for r in sorted(recs, key=lambda r: (r["sampler"], _kw_key(r.get("kwargs")))):
            name = r["sampler"] + (f" {_kw_key(r.get('kwargs'))}" if r.get("kwargs") else "")
            if r in ok:
                err, miss = _error(r)
                work = r["mcse"] ** 2 * r["evals"] / best
                cells = [f"{err:+.3f}" + (" (miss)" if miss else ""), f"{r['mcse']:.3f}", f"{r['evals']:.3g}", f"{work:.2f}"]
            else:
                cells = [r.get("status", "?"), "", "", ""]
            lines.append("| " + " | ".join([case, init, name, *cells]) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(REPO / "benchmarks" / "out" / "ma_path.json"))
    ap.add_argument("--sampler", default="smc")
    ap.add_argument("--base", default='{"path": "geometric"}')
    ap.add_argument("--other", default='{"path": "moment_averaging"}')
    ap.add_argument("--all", action="store_true", help="list every run per (case, init)")
    a = ap.parse_args(argv)
    results = json.loads(Path(a.results).read_text())
    if a.all:
        print(listing(results))
        return
    print(table(results, a.sampler, json.loads(a.base), json.loads(a.other)))


if __name__ == "__main__":
    main()
