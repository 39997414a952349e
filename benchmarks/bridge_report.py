"""Summarize the bridge-sampling validation run against the suite's references and SMC.

    python benchmarks/bridge_report.py [--bridge benchmarks/out/validate-bridge.json]
        [--smc benchmarks/out/validate-speed-hotpath.json] [--json benchmarks/out/bridge-report.json]

Reads the records ``benchmarks/validate.py --samplers bridge`` stored (NUTS with
``pm.sample``'s defaults but ``chains=4, cores=1``, then ``pmc.bridge_sampling``) and the
stored ``pmc.sample_smc()`` records of the same cases and seed (another run, another time:
the machine's load differs, so wall-time ratios are indicative). Per case: the error
against the reference, the verdict (``right``: ``|err| <= 3 sqrt(mcse² + ref_mcse²)`` and
``|err| <= 0.1 + 3 ref_mcse``; ``flagged``: wrong with an ``UnreliableEvidenceWarning``;
``silent miss``: wrong without), the flags, wall times (NUTS, bridge, SMC) and SMC's error;
then the error's coverage (share of ``|err| <= k · sqrt(mcse² + ref_mcse²)``, k = 1, 2, 3) and
the totals. Prints a Markdown table and writes the JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _verdict(r: dict) -> str:
    sd = float(np.hypot(r["mcse"], r.get("reference_mcse", 0.0)))
    right = abs(r["error"]) <= 3 * sd and abs(r["error"]) <= 0.1 + 3 * r.get("reference_mcse", 0.0)
    if right:
        return "right"
    return "flagged" if r.get("unreliable_warned") else "silent miss"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bridge", default=str(REPO / "benchmarks/out/validate-bridge.json"))
    ap.add_argument("--smc", default=str(REPO / "benchmarks/out/validate-speed-hotpath.json"))
    ap.add_argument("--json", default=str(REPO / "benchmarks/out/bridge-report.json"))
    args = ap.parse_args(argv)
    from validate import classify

    from pymc_crais.validation import get_case, load_references

    bridge = json.loads(Path(args.bridge).read_text())
    smc = {r["case"]: r for r in json.loads(Path(args.smc).read_text()).values()
           if r["sampler"] == "smc" and r.get("status") == "ok"}  # fmt: skip
    rows, out = [], []
    for rec in bridge.values():
        case = get_case(rec["case"])
        stored = load_references().get(case.name) if case.reference == "reference" else None
        if stored is not None and rec.get("status") == "ok":
            rec["reference"], rec["reference_mcse"] = stored["log_z"], stored["mcse"]
        rec = classify(rec, case.reference)
        s = smc.get(case.name)
        if s is not None:
            s = classify(s, case.reference)
        row = {"case": case.name, "reference": case.reference, "status": rec.get("status")}
        if rec.get("status") == "ok":
            b = rec.get("bridge", {})
            row.update(
                error=rec["error"], mcse=rec["mcse"], reference_mcse=rec.get("reference_mcse", 0.0),
                z=rec["z_with_reference"], verdict=_verdict(rec), flags=b.get("flags", ""),
                proposal=b.get("proposal"), pareto_k=b.get("pareto_k"),
                nuts_wall_s=rec["nuts_wall_s"], bridge_wall_s=rec["bridge_wall_s"],
                wall_s=rec["wall_s"], evals=rec["evals"],
            )  # fmt: skip
        else:
            row.update(error_message=rec.get("error_message", "")[:160], wall_s=rec.get("wall_s"))
        if s is not None:
            row.update(smc_wall_s=s["wall_s"], smc_error=s["error"], smc_mcse=s["mcse"],
                       smc_miss=s["miss"], smc_warned=s["unreliable_warned"])  # fmt: skip
        out.append(row)
        if row["status"] != "ok":
            rows.append(f"| {case.name} | {case.reference} | {row['status']}: "
                        f"{row.get('error_message', '')[:70]} | | | | | | | |")  # fmt: skip
            continue
        smc_txt = (f"{row['smc_wall_s']:.1f} | {row['smc_error']:+.3f} ± {row['smc_mcse']:.3f}"
                   if s is not None else " | ")  # fmt: skip
        rows.append(
            f"| {case.name} | {case.reference} | {row['error']:+.3f} ± {row['mcse']:.3f} | "
            f"{row['z']:+.1f} | {row['verdict']} | {row['flags'] or '-'} | {row['proposal']} | "
            f"{row['nuts_wall_s']:.1f} + {row['bridge_wall_s']:.1f} | {smc_txt} |"
        )
    ok = [r for r in out if r["status"] == "ok"]
    z = np.array([abs(r["z"]) for r in ok])
    unflagged = np.array([abs(r["z"]) for r in ok if not r["flags"]])
    summary = {
        "n_cases": len(out),
        "ran": len(ok),
        "refused_or_failed": [r["case"] for r in out if r["status"] != "ok"],
        "right": sum(r["verdict"] == "right" for r in ok),
        "flagged_wrong": [r["case"] for r in ok if r["verdict"] == "flagged"],
        "silent_miss": [r["case"] for r in ok if r["verdict"] == "silent miss"],
        "flagged_right": [r["case"] for r in ok if r["verdict"] == "right" and r["flags"]],
        "coverage_all": {k: float(np.mean(z <= k)) for k in (1, 2, 3)},
        "coverage_unflagged": {k: float(np.mean(unflagged <= k)) for k in (1, 2, 3)},
        "n_unflagged": int(unflagged.size),
        "wall_s_nuts_total": float(sum(r["nuts_wall_s"] for r in ok)),
        "wall_s_bridge_total": float(sum(r["bridge_wall_s"] for r in ok)),
        "wall_s_smc_total_same_cases": float(sum(r.get("smc_wall_s", 0.0) for r in ok)),
        "sources": {"bridge": args.bridge, "smc": args.smc},
    }
    Path(args.json).write_text(json.dumps({"summary": summary, "cases": out}, indent=1) + "\n")
    print("| case | ref | error ± MCSE | z | verdict | flags | proposal | NUTS + bridge s "
          "| SMC s | SMC error ± MCSE |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
