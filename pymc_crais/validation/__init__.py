"""The evidence validation suite: PyMC models with exact or independently computed ``log Z``.

>>> from pymc_crais.validation import cases, get_case
>>> inst = get_case("linreg_d2").build()      # model, log_z, log_z_mcse, method
>>> [c.name for c in cases("hierarchical")]   # filter by tag
>>> [c.name for c in cases(tier="applied")]  # models as users write them (applied_models)

``python benchmarks/validate.py`` runs every public sampler on the suite; see
``benchmarks/reports/validation.md``.
"""

from .cases import CASES, QUICK, Case, CaseInstance, cases, get_case, load_references

__all__ = ["CASES", "QUICK", "Case", "CaseInstance", "cases", "get_case", "load_references"]
