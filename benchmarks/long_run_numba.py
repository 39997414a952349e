"""When a run's chains start on Numba (``samplers/engine/staged.py``): wall time of
``pmc.sample_smc()`` with the rule as it is and with its cost test forced either way.

    python benchmarks/long_run_numba.py --cases applied_hier60_centred,hier_centered \
        [--seeds 6] [--chains 4] [--cold] [--calls default,0,1e9]

Each run is a fresh process calling ``pmc.sample_smc(model=..., random_seed=seed,
chains=chains, progressbar=False)`` with the default ``cores``. ``--calls`` sets
``staged.LONG_RUN_CALLS`` and the pilot's ``PILOT_CALLS`` per variant: ``default`` the rule as it is, ``0`` never costly (the
NumPy stage of each chain and pilot as before the rule; a set-up that spent its own budget
still sends its chains to Numba), ``1e9`` always costly. ``--cold``: each run with empty
PyTensor and Numba caches (new temporary ``base_compiledir`` and ``NUMBA_CACHE_DIR``), as a
new model on a new machine; otherwise the caches are the user's (warm after the first run).
Variants alternate within each (case, seed). Prints one line per run: wall seconds of the
call, log Z, error against the case's reference.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
import pymc_crais as pmc
from pymc_crais.samplers.engine import annealed_start, staged
from pymc_crais.validation import get_case
calls, case, seed, chains = sys.argv[1:5]
if calls != "default":
    staged.LONG_RUN_CALLS = annealed_start.PILOT_CALLS = float(calls)
inst = get_case(case).build()
t = time.perf_counter()
idata = pmc.sample_smc(model=inst.model, random_seed=int(seed), chains=int(chains), progressbar=False)
wall = time.perf_counter() - t
lz, mcse = pmc.log_marginal_likelihood(idata)
print(json.dumps({"wall": wall, "log_z": lz, "error": lz - inst.log_z, "mcse": mcse}))
"""


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", required=True)
    ap.add_argument("--seeds", default="6")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--calls", default="default,0")
    ap.add_argument("--cold", action="store_true")
    args = ap.parse_args(argv)
    for case in args.cases.split(","):
        for seed in args.seeds.split(","):
            for calls in args.calls.split(","):
                env = dict(os.environ, PYTHONPATH=str(REPO))
                with tempfile.TemporaryDirectory() as tmp:
                    if args.cold:
                        env["PYTENSOR_FLAGS"] = f"base_compiledir={tmp}/pt"
                        env["NUMBA_CACHE_DIR"] = f"{tmp}/numba"
                    out = subprocess.run(
                        [sys.executable, "-c", CHILD, calls, case, seed, str(args.chains)],
                        env=env, capture_output=True, text=True, check=True,
                    )  # fmt: skip
                rec = json.loads(out.stdout.strip().splitlines()[-1])
                print(f"{case} seed {seed} calls={calls} {'cold' if args.cold else 'warm'}: "
                      f"{rec['wall']:.1f} s, log Z {rec['log_z']:.4f} "
                      f"(error {rec['error']:+.4f} ± {rec['mcse']:.4f})", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
