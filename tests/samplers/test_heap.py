"""No full garbage collection inside a sampler call, and the caller's thresholds back after."""

import gc
import threading

import pytest

from pymc_crais.samplers.engine.heap import DEFERRED_THRESHOLD, deferred_full_collections


@pytest.fixture
def thresholds():
    saved = gc.get_threshold()
    yield saved
    gc.set_threshold(*saved)


def test_raised_inside_and_restored_after_nested_calls(thresholds):
    gc.set_threshold(700, 10, 10)
    with deferred_full_collections():
        assert gc.get_threshold() == (700, 10, DEFERRED_THRESHOLD)
        with deferred_full_collections():  # a sampler called from a sampler
            assert gc.get_threshold()[2] == DEFERRED_THRESHOLD
        assert gc.get_threshold()[2] == DEFERRED_THRESHOLD  # the outer call is still inside
    assert gc.get_threshold() == (700, 10, 10)


def test_restored_after_an_error(thresholds):
    gc.set_threshold(500, 7, 3)
    with pytest.raises(ValueError), deferred_full_collections():
        raise ValueError("a failing run")
    assert gc.get_threshold() == (500, 7, 3)


def test_a_collector_turned_off_or_changed_meanwhile_is_left_alone(thresholds):
    gc.set_threshold(0, 10, 10)  # threshold 0: the caller turned automatic collection off
    with deferred_full_collections():
        assert gc.get_threshold() == (0, 10, 10)
    gc.set_threshold(700, 10, 10)
    with deferred_full_collections():
        gc.set_threshold(100, 5, 5)  # the caller's code, inside the call
    assert gc.get_threshold() == (100, 5, 5)


def test_concurrent_calls_restore_once_the_last_leaves(thresholds):
    gc.set_threshold(700, 10, 10)
    inside, leave = threading.Event(), threading.Event()

    def other_call():
        with deferred_full_collections():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=other_call)
    with deferred_full_collections():
        t.start()
        inside.wait(10)
    assert gc.get_threshold()[2] == DEFERRED_THRESHOLD  # the thread's call is still inside
    leave.set()
    t.join(10)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_sampler_call_runs_no_full_collection(thresholds):
    """Through the public wrapper every sampler has: the oldest generation is not collected
    inside, and the thresholds are the caller's again afterwards."""
    from pymc_crais.samplers.engine.runner import single_threaded_blas

    gc.set_threshold(700, 10, 10)
    full = []

    def count(phase, info):
        if phase == "start" and info["generation"] == 2:
            full.append(info)

    # surviving objects as many as the process holds: the oldest generation grows by more
    # than the quarter that triggers a full collection (checked below without the wrapper)
    n = len(gc.get_objects()) // 2 + 10_000

    def allocate():
        garbage = []
        for _ in range(n):
            a, b = [], []
            a.append(b)
            b.append(a)
            garbage.append(a)
        return len(garbage)

    @single_threaded_blas
    def sampler():
        assert gc.get_threshold()[2] == DEFERRED_THRESHOLD
        return allocate()

    gc.callbacks.append(count)
    try:
        assert sampler() == n
        assert full == []
        assert gc.get_threshold() == (700, 10, 10)
        allocate()  # the same work outside a sampler call does run full collections
        assert full
    finally:
        gc.callbacks.remove(count)
