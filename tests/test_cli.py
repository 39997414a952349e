"""The console script: argument handling (the full demo is the README's first command)."""

import pytest

from pymc_crais.cli import PIMA_DROPPED, main
from pymc_crais.datasets import load_pima


def test_demo_help_lists_the_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for option in ("--draws", "--chains", "--cores", "--pima-steps", "--seed", "--figure", "--skip-check"):
        assert option in out


def test_dropped_pima_predictors_exist():
    assert set(PIMA_DROPPED) <= set(load_pima().feature_names) and len(PIMA_DROPPED) == 2
