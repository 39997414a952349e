"""CR-AIS against SMC at equal error, from validate.py's records (issue 31 item 6).

    python benchmarks/crais_efficiency.py benchmarks/out/validate-crais-eff-seed24.json --seed 24

For each case with a ``crais`` and an ``smc`` record (same seed and chains, default draws):
the ratios CR-AIS / SMC of wall time, model evaluations, MCSE² and wall · MCSE² (the cost at
equal Monte Carlo error), whether both runs ended in one step (the same importance sampling:
equal MCSE to rounding), and the medians over the cases, overall and per group.
"""

from __future__ import annotations

import argparse
import json
import statistics


def rows(records: dict, seed: int, chains: int = 4) -> list[dict]:
    out = []
    cases = []
    for r in records.values():
        if r["case"] not in cases:
            cases.append(r["case"])
    for c in cases:
        s = records.get(f"{c}|smc|chains={chains}|seed={seed}|draws=None")
        a = records.get(f"{c}|crais|chains={chains}|seed={seed}|draws=None")
        if not s or not a or s.get("status") != "ok" or a.get("status") != "ok":
            continue
        wall = a["wall_s"] / s["wall_s"]
        m2 = (a["mcse"] / s["mcse"]) ** 2
        out.append(
            {
                "case": c,
                "wall": wall,
                "evals": a["evals"] / s["evals"],
                "mcse2": m2,
                "eff": wall * m2,
                "same_is": abs(a["mcse"] / s["mcse"] - 1) < 1e-6,
                "crais_miss": bool(a.get("miss")),
                "crais_silent": bool(a.get("silent_miss")),
                "smc_miss": bool(s.get("miss")),
                "crais_wall_s": a["wall_s"],
                "smc_wall_s": s["wall_s"],
            }
        )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--chains", type=int, default=4)
    a = p.parse_args()
    rs = sorted(rows(json.load(open(a.results)), a.seed, a.chains), key=lambda r: r["eff"])
    print("| case | wall | evals | MCSE² | wall·MCSE² | one step both | CR-AIS miss |")
    print("|---|---|---|---|---|---|---|")
    for r in rs:
        miss = "silent" if r["crais_silent"] else ("warned" if r["crais_miss"] else "")
        print(
            f"| {r['case']} | {r['wall']:.2f} | {r['evals']:.2f} | {r['mcse2']:.2f} | "
            f"{r['eff']:.2f} | {'yes' if r['same_is'] else ''} | {miss} |"
        )
    for label, sub in (("all", rs), ("one step both", [r for r in rs if r["same_is"]]),
                       ("others", [r for r in rs if not r["same_is"]])):
        if sub:
            med = {k: statistics.median(r[k] for r in sub) for k in ("wall", "evals", "mcse2", "eff")}
            print(
                f"median over {len(sub)} ({label}): wall {med['wall']:.2f}, evals {med['evals']:.2f}, "
                f"MCSE² {med['mcse2']:.2f}, wall·MCSE² {med['eff']:.2f}"
            )


if __name__ == "__main__":
    main()
