"""The ``pymc-crais`` command line: ``pymc-crais demo`` runs the evidence demo.

Every argument is checked when it is parsed, before a model is built or compiled (the
figure's path included), and a user error ends with one line and exit status 2, as
argparse's own errors; no user error prints a traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["main"]


def _linear_regression_case(seed: int = 1, n: int = 50, d: int = 5, sigma: float = 0.5):
    """A conjugate model with an exact evidence: log N(y; 0, σ²I + X Xᵀ)."""
    import pymc as pm
    from scipy import stats

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + rng.normal(0.0, sigma, size=n)
    with pm.Model() as model:
        # X as data, as in the logistic regressions: Numba then compiles one batched matrix
        # product for both (an embedded constant has another type, and costs a minute more)
        Xd = pm.Data("X", X)
        beta = pm.Normal("beta", 0.0, 1.0, shape=d)
        pm.Normal("y", Xd @ beta, sigma, observed=y)
    exact = stats.multivariate_normal(np.zeros(n), sigma**2 * np.eye(n) + X @ X.T).logpdf(y)
    return model, float(exact)


#: The two Pima predictors the reduced model drops: the weakest in the full model's
#: posterior (|mean/sd| of 0.2 and 1.2; glucose is 9.4, bmi 5.3).
PIMA_DROPPED = ("skin_thickness", "age")


def _evals(idata) -> int:
    st = idata.sample_stats
    return int(st["n_logp_evals"].sum()) + sum(
        int(st.attrs.get(k, 0)) for k in ("n_logp_evals_tune", "n_logp_evals_pilot", "n_logp_evals_laplace", "n_logp_evals_refit")
    )


#: The name of each sampler the demo runs, as its output and figure call it.
SAMPLER_NAMES = {"sample_crais": "CR-AIS", "sample_smc": "SMC", "sample_ais": "AIS"}


def _compile(label: str, model) -> float:
    """Compile ``model`` before sampling it, so that its first compilation (long with cold
    PyTensor/Numba caches) is announced and timed on its own; the sampler reuses it (it is
    cached on the model). Returns the seconds taken."""
    from pymc_crais.samplers.engine.compile import compile_model_density, resolve_compile_kwargs

    print(f"  {label}: compiling the model...", flush=True)
    t0 = time.perf_counter()
    # the call sample_* makes for a gradient kernel or init="laplace"
    compile_model_density(model, gradient=True, compile_kwargs=resolve_compile_kwargs(None, None))
    return time.perf_counter() - t0


def _run(label, model, args, sampler: str = "sample_smc", **settings):
    """One run (SMC with its defaults unless told otherwise); prints what it is doing, then a line with log Z, wall time
    (compilation included) and evaluations."""
    import pymc_crais as pmc
    from pymc_crais.samplers.engine.progress import counted

    t0 = time.perf_counter()
    compile_time = _compile(label, model)
    steps = []
    if settings.get("init", "auto") == "auto":
        steps.append("automatic start")
    elif settings.get("init") == "laplace":
        steps.append("Laplace fit")
    if sampler == "sample_crais":
        steps.append("tuning run")
    steps.append(counted(args.chains, "chain"))
    print(f"  {label}: compiled in {compile_time:.1f} s; {SAMPLER_NAMES[sampler]}: "
          f"{', '.join(steps)}...", flush=True)
    idata = getattr(pmc, sampler)(
        model=model,
        draws=args.draws,
        chains=args.chains,
        cores=args.cores,
        random_seed=args.seed,
        progressbar=args.progress,  # live in a terminal, one line per finished chain otherwise
        **settings,
    )
    wall = time.perf_counter() - t0
    value, mcse = pmc.log_marginal_likelihood(idata)
    per_chain = ", ".join(f"{v:.3f}" for v in idata.sample_stats["log_marginal_likelihood"].values)
    print(f"  {label:<20} log Z = {value:9.3f} ± {mcse:.3f}   chains: {per_chain}   "
          f"{wall:5.1f} s  {_evals(idata):>11,d} logp evals", flush=True)
    return idata, wall


def _check_case(args) -> None:
    model, exact = _linear_regression_case()
    print("Sanity check, conjugate linear regression (d=5) with exact log Z:", flush=True)
    idata, _ = _run("defaults", model, args)
    import pymc_crais as pmc

    value, mcse = pmc.log_marginal_likelihood(idata)
    print(f"  exact log Z = {exact:.3f}; error {value - exact:+.3f} ({(value - exact) / mcse:+.1f} MCSE)\n")


def _figure(path, results: dict, tables: dict, references: dict, samplers: dict) -> str:
    """Per data set: the schedules of each run (top), the log Bayes factors against the best
    model (middle) and the error of ``log Z`` against the reference (bottom), with ±2 MCSE."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install 'pymc_crais[plots]'): no figure written"
    import pymc_crais as pmc

    n = len(results)
    fig, axes = plt.subplots(3, n, figsize=(5.5 * n, 11), layout="constrained",
                             height_ratios=(1.2, 1, 1))
    axes = np.asarray(axes).reshape(3, n)
    for k, (title, runs) in enumerate(results.items()):
        pmc.plot_schedule(runs, ax=axes[0, k])
        axes[0, k].set_title(f"{title}: {samplers[title]} schedules (each chain)")
        pmc.plot_evidence(tables[title], ax=axes[1, k])
        axes[1, k].set_title(f"{title}: log Bayes factor against the best model")
        if references.get(title):
            pmc.plot_evidence(tables[title], ax=axes[2, k], reference=references[title])
            axes[2, k].set_title(f"{title}: log Z − reference value")
        else:
            axes[2, k].set_axis_off()
    try:
        fig.savefig(path, dpi=110)
    except OSError as err:  # checked before sampling; the path can still vanish meanwhile
        return f"the figure could not be written to {path}: {err}"
    finally:
        plt.close(fig)
    return f"figure written to {path}"


def demo(args) -> int:
    """Bayes factors on the bundled data by ``pmc.sample_smc`` with its defaults: Pima full vs
    reduced logistic regression, Sonar with prior scales 1 and 5; prints the comparison tables
    and writes a figure."""
    import pymc_crais as pmc
    from pymc_crais.comparison import format_table
    from pymc_crais.datasets import REFERENCE_LOG_Z, load_pima, load_sonar
    from pymc_crais.models import logistic_regression
    from pymc_crais.samplers.engine.progress import counted

    t_start = time.perf_counter()
    print(f"pymc_crais {pmc.__version__}: Bayes factors by pmc.sample_smc with its defaults "
          f"({counted(args.chains, 'chain')} × {args.draws} particles, seed {args.seed})\n",
          flush=True)
    if not args.skip_check:
        _check_case(args)

    results, tables, references, walls, samplers = {}, {}, {}, {}, {}
    pima = load_pima()
    keep = [i for i, f in enumerate(pima.feature_names) if f not in PIMA_DROPPED]
    print(f"Pima Indians diabetes ({pima.X.shape[0]} rows, standardized, prior N(0, 5²), no intercept):",
          flush=True)
    runs = {}
    runs["full (8 predictors)"], walls["pima full"] = _run(
        "full (8 predictors)",
        logistic_regression(pima.X, pima.y, prior_sd=5.0, feature_names=pima.feature_names),
        args,
    )
    print(f"  reduced model: 6 predictors, without {' and '.join(PIMA_DROPPED)}", flush=True)
    runs["reduced (6)"], walls["pima reduced"] = _run(
        "reduced (6)",
        logistic_regression(pima.X[:, keep], pima.y, prior_sd=5.0,
                            feature_names=[pima.feature_names[i] for i in keep]),
        args,
    )
    results["Pima"], tables["Pima"] = runs, pmc.compare(runs)
    samplers["Pima"] = SAMPLER_NAMES["sample_smc"]
    ref = REFERENCE_LOG_Z["pima"]
    references["Pima"] = {"full (8 predictors)": ref}
    print(format_table(tables["Pima"]))
    full, full_mcse = pmc.log_marginal_likelihood(runs["full (8 predictors)"])
    print(f"  full model vs the reference log Z {ref[0]}: error {full - ref[0]:+.3f} "
          f"(MCSE {full_mcse:.3f})\n", flush=True)

    sonar = load_sonar()
    print(f"Sonar ({sonar.X.shape[0]} rows, 60 predictors, standardized, no intercept): prior scale 1 vs 5,"
          " by SMC with its defaults", flush=True)
    runs = {}
    for sd in (5.0, 1.0):
        name = f"prior sd {sd:g}"
        runs[name], walls[f"sonar sd {sd:g}"] = _run(
            name, logistic_regression(sonar.X, sonar.y, prior_sd=sd, feature_names=sonar.feature_names),
            args,
        )
    results["Sonar"], tables["Sonar"] = runs, pmc.compare(runs)
    samplers["Sonar"] = SAMPLER_NAMES["sample_smc"]
    ref = REFERENCE_LOG_Z["sonar"]
    references["Sonar"] = {"prior sd 5": ref}
    print(format_table(tables["Sonar"]))
    sd5, sd5_mcse = pmc.log_marginal_likelihood(runs["prior sd 5"])
    print(f"  prior sd 5 vs the reference log Z {ref[0]}: error {sd5 - ref[0]:+.3f} "
          f"(MCSE {sd5_mcse:.3f})\n", flush=True)
    print(_figure(args.figure, results, tables, references, samplers))
    print(f"total wall time {time.perf_counter() - t_start:.1f} s (includes compiling each model; "
          "log BF against the best model; P(model) under equal prior odds with its 95% Monte Carlo interval)")
    return 0


DESCRIPTION = """\
pymc_crais: evidence (marginal likelihood) estimation for PyMC models by annealed
importance sampling (AIS, constant-rate AIS, SMC, CR-SMC, RTS). The library is used from
Python (import pymc_crais as pmc; pmc.sample_smc()); this command runs its demo.
"""

EPILOG = """\
example:
  pymc-crais demo                 Bayes factors on the bundled Pima and Sonar data
  pymc-crais demo --help          the demo's options
"""


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line (no usage block): ``prog: error: ...``,
    with where to find the options, and exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _int_at_least(minimum: int, what: str):
    """An argparse ``type``: an integer ``>= minimum``; the message says what it counts."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer ({what}), got {text!r}"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum} ({what}), got {value}")
        return value

    return parse


#: What matplotlib writes (``savefig`` picks the format from the suffix).
FIGURE_SUFFIXES = (".eps", ".jpeg", ".jpg", ".pdf", ".pgf", ".png", ".ps", ".raw", ".rgba",
                   ".svg", ".svgz", ".tif", ".tiff", ".webp")


def figure_path_problem(path: str) -> str | None:
    """Why the demo could not write its figure to ``path`` (``None``: it can), found before
    anything is sampled: a folder in the file's place, a suffix matplotlib does not write, a
    missing folder, or a file or folder that cannot be written (tried: an existing file is
    opened for appending, which changes nothing; else a temporary file is made and removed
    in its folder)."""
    import tempfile

    target = Path(path).expanduser()
    folder = target.parent
    if target.is_dir():
        return f"--figure {path} is a directory; give a file name, e.g. {target / 'demo.png'}"
    if target.suffix.lower() not in FIGURE_SUFFIXES:
        return (f"--figure {path}: matplotlib cannot write a {target.suffix or 'suffix-less'} "
                f"file; end the name with .png (or .pdf, .svg, .jpg, ...)")
    if not folder.is_dir():
        return (f"--figure {path}: the directory {folder} does not exist; create it or pick "
                "another path")
    try:
        if target.exists():
            with open(target, "ab"):
                pass
        else:
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".pymc-crais-", suffix=".tmp"):
                pass
    except OSError as err:
        where = "the file" if target.exists() else f"the directory {folder}"
        return f"--figure {path}: {where} is not writable ({err.strerror}); pick another path"
    return None


def _version() -> str:
    """The installed distribution's version (the package's own when not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pymc_crais")
    except PackageNotFoundError:
        from pymc_crais import __version__

        return f"{__version__} (not installed)"


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pymc-crais", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND",
                                parser_class=_Parser)
    p = sub.add_parser(
        "demo", help="Bayes factors on the bundled data, with a figure (a few minutes)",
        description="Bayes factors on the bundled data: a conjugate model against its exact "
        "log Z, Pima (full vs reduced logistic regression) and Sonar (prior scale 1 vs 5), by "
        "pmc.sample_smc with its defaults (4 chains each unless told); prints the comparison "
        "tables and writes a figure.",
    )
    p.add_argument("--draws", type=_int_at_least(2, "particles per chain"), default=2000,
                   help="particles per chain, at least 2 (default 2000, sample_smc's default)")
    p.add_argument("--chains", type=_int_at_least(1, "chains per model"), default=4,
                   help="independent chains per model (default 4)")
    p.add_argument("--cores", type=_int_at_least(1, "worker processes"), default=None,
                   help="worker processes (default: all CPUs)")
    p.add_argument("--seed", type=_int_at_least(0, "a random seed"), default=2026,
                   help="random seed, an integer >= 0 (default 2026)")
    p.add_argument("--figure", default="pymc_crais_demo.png",
                   help="the figure to write (default pymc_crais_demo.png; .pdf, .svg... as "
                   "matplotlib writes them); checked before anything is sampled")
    p.add_argument("--skip-check", action="store_true", help="skip the conjugate sanity check")
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="no progress output (by default a live display in a terminal, one line "
                   "per finished chain otherwise)")
    return parser


def main(argv=None) -> int:
    """Entry point of the ``pymc-crais`` console script: ``pymc-crais demo`` runs the demo;
    without a command it prints the help."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        problem = figure_path_problem(args.figure)
        if problem:
            parser.exit(2, f"pymc-crais demo: error: {problem}\n")
        try:
            return demo(args)
        except KeyboardInterrupt:
            print("pymc-crais: interrupted", file=sys.stderr)
            return 130
    parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
