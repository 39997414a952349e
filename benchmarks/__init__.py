"""Benchmark and study scripts (not part of the installed package).

Run a script from the repository root, either as ``python benchmarks/NAME.py`` (it imports
``pymc_crais`` as installed, and its sibling scripts by name) or as
``python -m benchmarks.NAME``; what imports :mod:`benchmarks.studies` needs the latter.
Models come from :mod:`pymc_crais.validation`; no script edits ``sys.path``.
"""
