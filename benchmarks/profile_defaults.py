"""Where the wall time of a default ``pmc.sample_smc()`` call goes, phase by phase.

    python benchmarks/profile_defaults.py [--cases linreg_d2,challenger,...] [--cores 1]
        [--chains 4] [--repeat 2] [--json PATH]

Each case runs in a fresh subprocess (as ``benchmarks/validate.py`` does): the model is built,
then ``pmc.sample_smc(model=..., random_seed=1, chains=4, cores=..., progressbar=False)`` is
called ``--repeat`` times (the first call pays the imports done inside the call and the
compilation, from PyTensor's on-disk cache when it is warm; later calls find the compiled
functions in the in-memory cache). Every phase is timed inclusively with
``time.perf_counter`` by wrapping the functions that implement it; the model evaluations of
each phase are the density's ``n_evals`` where it has one. Wall times on a loaded machine
are noisy: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = "linreg_d2,challenger,logistic_n50_d3,coal_poisson_trend,dirichlet_multinomial,pima_sd5"

# (label, module, attribute): the functions timed, inclusively
PHASES = (
    ("prepare (compile + init)", "pymc_crais.samplers.smc", "prepare"),
    ("  compile model density", "pymc_crais.samplers.pipeline", "compile_model_density"),
    ("  compile prior sampler", "pymc_crais.samplers.pipeline", "prior_sampler"),
    ("  init (build_initial)", "pymc_crais.samplers.pipeline", "build_initial"),
    ("    Laplace fit", "pymc_crais.samplers.init_auto", "laplace_fit"),
    ("    mode search", "pymc_crais.samplers.init_auto", "search_modes"),
    ("    pilot k-hat", "pymc_crais.samplers.init_auto", "_pilot_khat"),
    ("scale-shift pilot", "pymc_crais.samplers.smc", "scale_shift_pilot"),
    ("chains (annealing)", "pymc_crais.samplers.smc", "run_anneal_chains"),
    ("finish", "pymc_crais.samplers.smc", "finish"),
    ("  diagnostics (check_chains)", "pymc_crais.diagnostics", "check_chains"),
    ("  posterior mapper", "pymc_crais.samplers.pipeline", "posterior_mapper"),
    ("  build DataTree", "pymc_crais.results", "build_datatree"),
    ("pareto_khat (all calls)", "pymc_crais.tail_stats", "pareto_khat"),
)


def _worker(case: str, cores: int | None, chains: int, repeat: int) -> dict:
    import importlib

    t0 = time.perf_counter()
    import pymc_crais as pmc
    from pymc_crais.validation import get_case

    t_import = time.perf_counter() - t0
    times: dict[str, float] = {}

    def wrap(label, fn):
        def timed(*a, **k):
            s = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                times[label] = times.get(label, 0.0) + time.perf_counter() - s

        return timed

    for label, mod, attr in PHASES:
        m = importlib.import_module(mod)
        setattr(m, attr, wrap(label, getattr(m, attr)))
    model = get_case(case).build().model
    calls = []
    for _ in range(repeat):
        times.clear()
        s = time.perf_counter()
        idata = pmc.sample_smc(model=model, random_seed=1, chains=chains, cores=cores,
                               progressbar=False)  # fmt: skip
        wall = time.perf_counter() - s
        st = idata["sample_stats"]
        calls.append({
            "wall_s": wall,
            "phases": dict(times),
            "log_z": float(pmc.log_marginal_likelihood(idata)[0]),
            "evals_chains": int(st["n_logp_evals"].values.sum()),
            "evals_init": int(st.attrs.get("n_logp_evals_laplace", 0)),
            "evals_pilot": int(st.attrs.get("n_logp_evals_pilot", 0)),
            "init_choice": str(st.attrs.get("init_choice")),
        })  # fmt: skip
    return {"case": case, "cores": cores, "chains": chains, "import_s": t_import, "calls": calls,
            "loadavg": list(os.getloadavg())}  # fmt: skip


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--cores", default="1", help="an int, or 'default' (the sampler's default)")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    cores = None if args.cores == "default" else int(args.cores)
    if args._worker:
        print("JSON" + json.dumps(_worker(args._worker, cores, args.chains, args.repeat)))
        return
    out = []
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for case in args.cases.split(","):
        cmd = [sys.executable, "-W", "ignore", __file__, "--_worker", case, "--cores", args.cores,
               "--chains", str(args.chains), "--repeat", str(args.repeat)]  # fmt: skip
        res = subprocess.run(cmd, env=env, capture_output=True, text=True)
        line = [ln for ln in res.stdout.splitlines() if ln.startswith("JSON")]
        if not line:
            print(case, "failed:", res.stderr[-2000:])
            continue
        rec = json.loads(line[0][4:])
        out.append(rec)
        print(f"\n{case} (cores={args.cores}, import pymc_crais {rec['import_s']:.2f} s, "
              f"load {rec['loadavg'][0]:.2f})")  # fmt: skip
        for i, c in enumerate(rec["calls"]):
            print(f"  call {i + 1}: wall {c['wall_s']:.2f} s, log Z {c['log_z']:.4f}, init "
                  f"{c['init_choice']}, evals chains {c['evals_chains']} init {c['evals_init']} "
                  f"pilot {c['evals_pilot']}")  # fmt: skip
        for label, _, _ in PHASES:
            vals = [c["phases"].get(label) for c in rec["calls"]]
            if any(v is not None for v in vals):
                print(f"    {label:32s}" + "".join(f"{v:8.2f}" if v is not None else "       -"
                                                   for v in vals))  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
