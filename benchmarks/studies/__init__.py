"""Studies that no sampler uses, kept out of the package with their benchmark and tests:

* :mod:`.moment_averaging`: geometric and moment-averaging paths between Gaussian endpoints,
  exact AIS, the optimal binned schedule (seed 004; ``benchmarks/bench_moment_averaging.py``,
  ``tests/core/test_moment_averaging.py``).
"""
