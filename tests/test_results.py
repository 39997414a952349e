"""The results layer builds its datasets as arviz_base's dict_to_dataset does, without it."""

import sys
import warnings

import numpy as np
import pytest
import xarray as xr

from pymc_crais import results


def _arviz(data, coords, dims, sample_dims, attrs):
    from arviz_base import dict_to_dataset

    return dict_to_dataset(data, coords=coords, dims=dims, sample_dims=sample_dims, attrs=attrs,
                           index_origin=0)  # fmt: skip


CASES = [
    # posterior: scalars, vectors with and without named dims, a matrix half-named
    (
        {"mu": np.zeros((4, 50)), "b": np.ones((4, 50, 3)), "z": np.ones((4, 50, 2, 5)),
         "w": np.ones((4, 50, 6))},
        {"group": ["a", "b", "c", "d", "e"], "obs": np.arange(10, 16)},
        {"z": [None, "group"], "w": ["obs"]},
        ["chain", "draw"],
    ),  # fmt: skip
    # observed data: no sample dims
    ({"y": np.arange(8.0), "X": np.ones((8, 2))}, {"obs_id": np.arange(8)}, {"y": ["obs_id"]}, []),
]


@pytest.mark.parametrize("data, coords, dims, sample_dims", CASES)
def test_dataset_identical_to_arviz_base(data, coords, dims, sample_dims):
    attrs = {"method": "smc", "alpha": 0.0}
    ours = results._dataset_from_arrays(data, coords, dims, sample_dims, attrs)
    ref = _arviz(data, coords, dims, sample_dims, attrs)
    ours.attrs.pop("created_at")
    ref.attrs.pop("created_at")
    xr.testing.assert_identical(ours, ref)
    assert list(ours.attrs) == list(ref.attrs)


def test_more_chains_than_draws_warns_as_arviz():
    data = {"mu": np.zeros((4, 2))}
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        results._dataset_from_arrays(data, {}, {}, ["chain", "draw"], {})
    with warnings.catch_warnings(record=True) as ref:
        warnings.simplefilter("always")
        _arviz(data, {}, {}, ["chain", "draw"], {})
    assert [str(w.message) for w in ours] == [str(w.message) for w in ref]
    assert len(ours) == 1


def test_too_many_dims_is_an_error_naming_the_variable():
    with pytest.raises(ValueError, match="'mu'.*dims"):
        results._dataset_from_arrays({"mu": np.zeros((4, 5))}, {}, {"mu": ["a"]}, ["chain", "draw"], {})


def test_a_default_run_imports_no_arviz(tmp_path):
    """The whole default path (compile, init='auto', SMC, diagnostics, DataTree) imports
    neither arviz_base, arviz_stats, scipy.stats nor dask (about 2 s of a small model's
    call)."""
    import subprocess

    code = (
        "import sys, numpy as np, pymc as pm, pymc_crais as pmc\n"
        "with pm.Model() as m:\n"
        "    mu = pm.Normal('mu', 0, 1)\n"
        "    pm.Normal('y', mu, 1, observed=np.array([0.1, -0.3, 0.5]))\n"
        "pmc.sample_smc(draws=200, chains=2, cores=1, model=m, random_seed=1, progressbar=False)\n"
        "print(sorted(k for k in ('arviz_base', 'arviz_stats', 'scipy.stats', 'dask') if k in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert out.stdout.strip().splitlines()[-1] == "[]"
