"""Where the wall time of a default ``pmc.sample_smc()`` call goes, phase by phase.

    python benchmarks/profile_defaults.py [--cases linreg_d2,challenger,...] [--cores 1]
        [--chains 4] [--repeat 2] [--json PATH] [--warm-session] [--pm]

Each case runs in a fresh subprocess (as ``benchmarks/validate.py`` does): the model is built,
then ``pmc.sample_smc(model=..., random_seed=1, chains=4, cores=..., progressbar=False)`` is
called ``--repeat`` times (the first call pays the imports done inside the call and the
compilation, from PyTensor's on-disk cache when it is warm; later calls find the compiled
functions in the in-memory cache). Every phase is timed inclusively with
``time.perf_counter`` by wrapping the functions that implement it; the model evaluations of
each phase are the density's ``n_evals`` where it has one. Wall times on a loaded machine
are noisy: the load average is printed with them.

``--warm-session``: before the first call, make ``benchmarks/validate.py``'s small call of
both packages (the same option there), so call 1 is what a new model costs in a session that
has already sampled: its compilation is timed, the one-time costs of a process's first call
are not. ``--pm``: after our calls, time ``pm.sample_smc`` with its defaults on the same
model in the same process (same chains and cores), and print how much of our call 1 is the
compilation of the model (the model density and the prior sampler) against PyMC's wall time:
``pm wall / compile`` bounds the speed-up any call that compiles the model this way can reach.
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
    ("  compile model density", "pymc_crais.samplers.engine.pipeline", "compile_model_density"),
    ("    vectorize_graph", "pymc_crais.samplers.engine.model_graph", "vectorize_graph"),
    ("    our rewrite pass", "pymc_crais.samplers.engine.model_graph", "simplify_logp_graph"),
    ("    pt.grad", "pytensor.tensor", "grad"),
    ("  compile prior sampler", "pymc_crais.samplers.engine.pipeline", "prior_sampler"),
    ("  init (build_initial)", "pymc_crais.samplers.engine.pipeline", "build_initial"),
    ("    Laplace fit", "pymc_crais.samplers.engine.init_auto", "laplace_fit"),
    ("    mode search", "pymc_crais.samplers.engine.init_auto", "search_modes"),
    ("    pilot k-hat", "pymc_crais.samplers.engine.init_auto", "pilot_khat"),
    ("scale-shift pilot", "pymc_crais.samplers.smc", "scale_shift_pilot"),
    ("annealed start", "pymc_crais.samplers.smc", "smc_annealed_start"),
    ("conditional start (fit + pilots)", "pymc_crais.samplers.smc", "one_step_conditional_start"),
    ("  block gradient", "pymc_crais.samplers.engine.conditional_start", "add_block_gradient"),
    ("  hyperparameter fit", "pymc_crais.samplers.engine.conditional_start", "fit_hyper"),
    ("conditional draws (all)", "pymc_crais.core.conditional_laplace", "ConditionalLaplace.draw"),
    ("  latent Newton (all)", "pymc_crais.core.conditional_laplace", "latent_newton"),
    ("moves at the target (all)", "pymc_crais.core.stages", "StageStrategy.move"),
    ("chains (annealing)", "pymc_crais.samplers.engine.anneal_chain", "run_anneal_chains"),
    ("finish", "pymc_crais.samplers.engine.anneal_chain", "finish"),
    ("  diagnostics (check_chains)", "pymc_crais.diagnostics", "check_chains"),
    ("  posterior mapper", "pymc_crais.samplers.engine.pipeline", "posterior_mapper"),
    ("  build DataTree", "pymc_crais.results", "build_datatree"),
    ("pareto_khat (all calls)", "pymc_crais.tail_stats", "pareto_khat"),
)


REWRITES = "PyTensor rewrites (all compiles)"
LINKING = "PyTensor linking (all compiles)"
COMPILE_PHASES = ("  compile model density", "  compile prior sampler")


def timed_into(times: dict, label: str, fn):
    """``fn``, adding the seconds of each call to ``times[label]`` (inclusive)."""

    def timed(*a, **k):
        s = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            times[label] = times.get(label, 0.0) + time.perf_counter() - s

    return timed


def _worker(case: str, cores: int | None, chains: int, repeat: int, warm_session: bool = False,
            with_pm: bool = False) -> dict:  # fmt: skip
    import importlib
    import warnings

    t0 = time.perf_counter()
    import pymc_crais as pmc
    from pymc_crais.validation import get_case

    t_import = time.perf_counter() - t0
    times: dict[str, float] = {}

    def wrap(label, fn):
        return timed_into(times, label, fn)

    for label, mod, attr in PHASES:
        m = importlib.import_module(mod)
        owner, _, name = attr.rpartition(".")  # "Class.method": wrapped on the class
        target = getattr(m, owner) if owner else m
        setattr(target, name, wrap(label, getattr(target, name)))
    # PyTensor's graph rewrites inside every compilation of the call (a static method)
    from pytensor.compile.maker import FunctionMaker

    FunctionMaker.prepare_fgraph = staticmethod(wrap(REWRITES, FunctionMaker.prepare_fgraph))
    FunctionMaker.create = wrap(LINKING, FunctionMaker.create)
    if warm_session:
        from validate import _warm_session

        _warm_session()
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
    pm_wall = None
    if with_pm:
        import pymc as pm

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = time.perf_counter()
            pm.sample_smc(model=model, random_seed=1, chains=chains, cores=cores or 1,
                          progressbar=False)  # fmt: skip
            pm_wall = time.perf_counter() - s
    return {"case": case, "cores": cores, "chains": chains, "import_s": t_import, "calls": calls,
            "warm_session": warm_session, "pm_wall_s": pm_wall,
            "loadavg": list(os.getloadavg())}  # fmt: skip


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--cores", default="1", help="an int, or 'default' (the sampler's default)")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--warm-session",
        action="store_true",
        help="a small call of both packages first (see the module docstring)",
    )
    ap.add_argument("--pm", action="store_true", help="also time pm.sample_smc in the worker")
    ap.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    cores = None if args.cores == "default" else int(args.cores)
    if args._worker:
        print("JSON" + json.dumps(_worker(args._worker, cores, args.chains, args.repeat,
                                          args.warm_session, args.pm)))  # fmt: skip
        return
    out = []
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for case in args.cases.split(","):
        cmd = [sys.executable, "-W", "ignore", __file__, "--_worker", case, "--cores", args.cores,
               "--chains", str(args.chains), "--repeat", str(args.repeat)]  # fmt: skip
        cmd += ["--warm-session"] * args.warm_session + ["--pm"] * args.pm
        res = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True)
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
        for label in [p[0] for p in PHASES] + [REWRITES, LINKING]:
            vals = [c["phases"].get(label) for c in rec["calls"]]
            if any(v is not None for v in vals):
                print(f"    {label:32s}" + "".join(f"{v:8.2f}" if v is not None else "       -"
                                                   for v in vals))  # fmt: skip
        if rec.get("pm_wall_s") is not None:
            first = rec["calls"][0]
            comp = sum(first["phases"].get(k, 0.0) for k in COMPILE_PHASES)
            rec["compile_s"] = comp
            rec["rewrites_s"] = first["phases"].get(REWRITES, 0.0)
            print(f"  pm.sample_smc {rec['pm_wall_s']:.2f} s: call 1 {first['wall_s']:.2f} s "
                  f"({rec['pm_wall_s'] / first['wall_s']:.1f}x), of which compiling the model "
                  f"{comp:.2f} s (pm / compile {rec['pm_wall_s'] / comp:.1f}x)")  # fmt: skip
    if out and all(r.get("pm_wall_s") is not None for r in out):
        print("\ncase                          pm s   ours s  ratio  compile s  pm/compile"
              "  rewrites s  pm/rewrites")  # fmt: skip
        for r in out:
            c1 = r["calls"][0]["wall_s"]
            print(f"{r['case']:28s}{r['pm_wall_s']:7.2f}{c1:8.2f}{r['pm_wall_s'] / c1:7.1f}"
                  f"{r['compile_s']:10.2f}{r['pm_wall_s'] / r['compile_s']:11.1f}"
                  f"{r['rewrites_s']:12.2f}{r['pm_wall_s'] / r['rewrites_s']:12.1f}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
