"""One validation case, sampled on an empty compile cache: the NumPy stage against Numba only.

    python benchmarks/cold_model.py CASE [CASE ...] [--chains 4] [--seed 35]

For each case and each variant (``staged``: ``pmc.sample_smc()`` as it is, NumPy first;
``numba``: ``pmc.sample_smc(backend="numba")``, Numba from the start, the default before
``engine/staged.py``), a fresh Python process with its own empty ``base_compiledir`` and
``NUMBA_CACHE_DIR`` builds the case and calls the sampler (``cores=1``), as a user's first
call on a model they just wrote. Prints the call's wall time, the process's CPU time and
``log Z`` against the reference.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import sys, time, warnings, resource
warnings.simplefilter("ignore")
import pymc_crais as pmc
from pymc_crais.validation import get_case
name, variant, chains, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
inst = get_case(name).build()
kw = {"backend": "numba"} if variant == "numba" else {}
t = time.perf_counter()
idata = pmc.sample_smc(model=inst.model, random_seed=seed, chains=chains, cores=1,
                       progressbar=False, **kw)
call = time.perf_counter() - t
r = resource.getrusage(resource.RUSAGE_SELF)
lz, se = pmc.log_marginal_likelihood(idata)
print(f"{name:26s} {variant:6s} call {call:6.2f} s  process cpu {r.ru_utime + r.ru_stime:6.2f} s"
      f"  log Z {lz:.4f} ± {se:.4f} (reference {inst.log_z:.4f})", flush=True)
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--seed", type=int, default=35)
    args = ap.parse_args(argv)
    for case in args.cases:
        for variant in ("staged", "numba"):
            with tempfile.TemporaryDirectory() as tmp:
                env = dict(os.environ)
                flags = [f for f in env.get("PYTENSOR_FLAGS", "").split(",") if f and "compiledir" not in f]
                env["PYTENSOR_FLAGS"] = ",".join([*flags, f"base_compiledir={tmp}/pytensor"])
                env["NUMBA_CACHE_DIR"] = f"{tmp}/numba"
                env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, case, variant, str(args.chains), str(args.seed)],
                    env=env, capture_output=True, text=True, check=False,
                )
                line = [ln for ln in out.stdout.splitlines() if ln.strip()]
                print(line[-1] if line else f"{case} {variant} failed: {out.stderr[-500:]}", flush=True)


if __name__ == "__main__":
    main()
