"""Which validation-suite models still fall back to per-particle evaluation, and where.

Builds every case of ``pymc_crais.validation`` and, for each, the three batched functions a
run compiles: the prior sampler (initial particles), the log-density (prior, likelihood and,
for continuous models, gradients) and the map back to named variables. Any
``PerParticleFallbackWarning`` is reported with the part that raised it.

    python benchmarks/check_fallbacks.py            # a Markdown table
    python benchmarks/check_fallbacks.py --cases nig_d6,coal_switchpoint
"""

from __future__ import annotations

import argparse
import warnings


def check_model(model) -> dict:
    """``{part: "ok" | "fallback: <reason>"}`` for the prior, the density and the map."""
    from pymc_crais.samplers.engine.compile import (
        PerParticleFallbackWarning,
        compile_model_density,
        parameter_layout,
    )
    from pymc_crais.samplers.engine.mapping import PosteriorMapper
    from pymc_crais.samplers.engine.prior import PriorSampler

    layout = parameter_layout(model)
    builders = {
        "prior draws": lambda: PriorSampler(model, layout),
        "log-density": lambda: compile_model_density(model, gradient=not layout.has_discrete),
        "named variables": lambda: PosteriorMapper(model, layout),
    }
    out = {}
    for part, build in builders.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            build()
        fallbacks = [w for w in caught if issubclass(w.category, PerParticleFallbackWarning)]
        if fallbacks:  # one line, no table separators
            reason = " ".join(str(fallbacks[0].message).split()).replace("|", "/")
            out[part] = f"fallback: {reason[:160]}"
        else:
            out[part] = "ok"
    return out


def main(argv=None) -> int:
    from pymc_crais.validation import CASES

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=None, help="comma-separated case names (default: all)")
    args = ap.parse_args(argv)
    names = args.cases.split(",") if args.cases else list(CASES)
    print("| case | prior draws | log-density | named variables |")
    print("|---|---|---|---|")
    n_fallback = 0
    for name in names:
        result = check_model(CASES[name].build_model())
        n_fallback += sum(v != "ok" for v in result.values())
        print(f"| {name} | " + " | ".join(result.values()) + " |", flush=True)
    print(f"\n{n_fallback} fallback(s) in {len(names)} cases")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
