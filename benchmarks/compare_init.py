"""Tabulate ``benchmarks/validate.py --init`` runs side by side: prior, laplace and auto.

    python benchmarks/compare_init.py RESULTS.json [MORE.json ...] [--chains 4 --seed 1 --draws 1000]

Reads the stores written by ``validate.py --results`` (runs made with ``--init prior``,
``--init laplace`` and ``--init auto``), classifies each run as ``validate.py`` does (miss:
|error| > 3 MCSE or beyond the case's tolerance; ``warned``: an
``UnreliableEvidenceWarning``) and prints one Markdown row per (case, sampler): each start's
error ± MCSE (``*`` a miss, ``!`` warned) and evaluations, what ``init="auto"`` chose and
why, and whether auto is within noise of the better of the other two
(``|err_auto| ≤ min(|err_prior|, |err_laplace|) + 3·√(MCSE_auto² + MCSE_best²)`` or not a
miss).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


INITS = ("prior", "laplace", "auto")


def _cell(rec) -> str:
    if rec is None:
        return "—"
    if rec.get("status") != "ok":
        return rec.get("status", "?")
    mark = ("*" if rec["miss"] else "") + ("!" if rec["unreliable_warned"] else "")
    return f"{rec['error']:+.3f} ± {rec['mcse']:.3f}{mark}"


def _evals(rec) -> str:
    return f"{rec['evals']:.3g}" if rec and rec.get("status") == "ok" else ""


def _verdict(recs) -> str:
    auto = recs.get("auto")
    others = [r for k, r in recs.items() if k != "auto" and r and r.get("status") == "ok"]
    if not auto or auto.get("status") != "ok" or not others:
        return ""
    if not auto["miss"]:
        return "ok"
    best = min(others, key=lambda r: abs(r["error"]))
    noise = 3 * (auto["mcse"] ** 2 + best["mcse"] ** 2) ** 0.5
    return "within noise" if abs(auto["error"]) <= abs(best["error"]) + noise else "WORSE"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--draws", type=int, default=1000)
    args = ap.parse_args(argv)

    from validate import classify

    from pymc_crais.validation import get_case, load_references

    store = {}
    for path in args.results:
        store.update(json.loads(Path(path).read_text()))
    table: dict[tuple, dict] = {}
    for rec in store.values():
        init = rec.get("init")
        if init not in INITS or rec["chains"] != args.chains or rec["seed"] != args.seed:
            continue
        if rec["draws"] != args.draws:
            continue
        case = get_case(rec["case"])
        if case.reference == "reference" and rec.get("status") == "ok":
            stored = load_references().get(rec["case"])
            if stored is not None:
                rec["reference"], rec["reference_mcse"] = stored["log_z"], stored["mcse"]
        table.setdefault((rec["case"], rec["sampler"]), {})[init] = classify(rec, case.reference)
    print("| case | sampler | prior | laplace | auto | auto chose | evals prior / laplace / auto "
          "| auto vs best |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for (case, sampler), recs in table.items():
        auto = recs.get("auto") or {}
        used = auto.get("init_used") or {}
        chose = used.get("init_choice", "")
        if used.get("init_reason"):
            chose += f": {used['init_reason']}"
        evals = " / ".join(_evals(recs.get(k)) for k in INITS)
        print(f"| {case} | {sampler} | {_cell(recs.get('prior'))} | {_cell(recs.get('laplace'))} "
              f"| {_cell(recs.get('auto'))} | {chose} | {evals} | {_verdict(recs)} |")  # fmt: skip


if __name__ == "__main__":
    main()
