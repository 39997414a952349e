"""The console script: argument handling (the full demo is the README's first command)."""

import numpy as np
import pytest

from pymc_crais import cli
from pymc_crais.cli import PIMA_DROPPED, main
from pymc_crais.datasets import load_pima


def test_demo_help_lists_the_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for option in ("--draws", "--chains", "--cores", "--seed", "--figure", "--skip-check"):
        assert option in out
    assert "``" not in out


def test_no_arguments_print_the_help_and_do_not_start_the_demo(capsys, monkeypatch):
    monkeypatch.setattr(cli, "demo", lambda args: pytest.fail("the demo must not start"))
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "usage: pymc-crais" in out and "demo" in out and "``" not in out
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert "``" not in capsys.readouterr().out


def test_dropped_pima_predictors_exist():
    assert set(PIMA_DROPPED) <= set(load_pima().feature_names) and len(PIMA_DROPPED) == 2


def test_demo_compiles_once_what_the_samplers_use(capsys):
    """The demo compiles each model up front (to announce and time it); the samplers it then
    runs must reuse that compilation, not compile the density again."""
    import pymc_crais as pmc
    from pymc_crais.samplers import compile as compile_mod

    X = np.random.default_rng(0).normal(size=(30, 2))
    y = (X[:, 0] > 0).astype(int)
    model = pmc.models.logistic_regression(X, y)
    cli._compile("tiny", model)
    assert "compiling" in capsys.readouterr().out
    def density_keys():
        return [k for k in compile_mod._COMPILED[model] if k[-1][0] == "density"]

    entries = density_keys()
    assert len(entries) == 1
    for sampler in ("sample_crais", "sample_smc"):
        kwargs = {"schedule": "constant_rate", "n_mcmc_steps": 2} if sampler == "sample_smc" else {"n_steps": 10}
        getattr(pmc, sampler)(model=model, draws=50, chains=1, cores=1, random_seed=1,
                              progressbar=False, init="laplace", **kwargs)
        assert density_keys() == entries, sampler
