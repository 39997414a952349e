"""Fixtures shared by the samplers' tests."""

import pytest


@pytest.fixture
def annealed_pilot_calls(monkeypatch):
    """What the annealed starts (samplers/engine/annealed_start.py) asked of their pilot:
    a list that gets ``(particles a chain, transitions a stage at most)`` for each pilot run
    and the ``shrink`` flag of each Student-t fit, in call order."""
    from pymc_crais.samplers.engine import annealed_start

    seen, run, fit = [], annealed_start.run_anneal_chains, annealed_start.student_t_from_draws

    def recorded(setup, path, schedule, label, options):
        seen.append((setup.draws, options.moves.n_transitions))
        return run(setup, path, schedule, label, options)

    def recorded_fit(draws, **kwargs):
        seen.append(kwargs["shrink"])
        return fit(draws, **kwargs)

    monkeypatch.setattr(annealed_start, "run_anneal_chains", recorded)
    monkeypatch.setattr(annealed_start, "student_t_from_draws", recorded_fit)
    return seen
