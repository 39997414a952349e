"""The garbage collector during a sampler call: no full collections until the call ends.

Python's cyclic garbage collector runs a full collection, which walks every tracked object
of the process, when the oldest generation has grown by a quarter since the last one. A
sampler call grows it fast: compiling a model builds and rewrites PyTensor graphs, and the
first call of a process imports large parts of SciPy, ArviZ and xarray. A 3-parameter
regression's first call ran 3 full collections over 150,000–250,000 objects, 0.4–0.55 s of
a 5–8 s process on a loaded 2-core machine, though almost nothing they walked could be
garbage (imported modules, the model, the compiled functions).

Inside a call the threshold of the oldest generation is raised so that none runs. The young
generations are collected as usual, so short-lived cycles (most of what graph rewriting
leaves behind) are still freed at once; what survives them is collected by the first full
collection after the call. When the last concurrent call of the process ends the caller's
thresholds are put back, unless something else changed them meanwhile. Collection timing
changes no result: the same seed gives the same bits. A caller who disabled the collector
(``gc.disable()`` or a first threshold of 0) is left alone.
"""

from __future__ import annotations

import contextlib
import gc
import threading

__all__ = ["DEFERRED_THRESHOLD", "deferred_full_collections"]

DEFERRED_THRESHOLD = 1_000_000
"""The oldest generation's threshold inside a call: collections of the middle generation
before a full one (Python's default is 10)."""

_LOCK = threading.Lock()
_STATE: dict = {"users": 0, "saved": None, "ours": None}


@contextlib.contextmanager
def deferred_full_collections():
    """No full garbage collection while any sampler call of this process is inside
    (re-entrant and thread-safe: the first call in raises the oldest generation's threshold
    to :data:`DEFERRED_THRESHOLD`, the last one out restores the caller's thresholds)."""
    with _LOCK:
        if _STATE["users"] == 0:
            saved = gc.get_threshold()
            if gc.isenabled() and saved[0] > 0 and len(saved) == 3:
                ours = (saved[0], saved[1], max(saved[2], DEFERRED_THRESHOLD))
                gc.set_threshold(*ours)
                _STATE["saved"], _STATE["ours"] = saved, ours
        _STATE["users"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _STATE["users"] -= 1
            if _STATE["users"] == 0 and _STATE["saved"] is not None:
                if gc.get_threshold() == _STATE["ours"]:  # nobody changed them meanwhile
                    gc.set_threshold(*_STATE["saved"])
                _STATE["saved"] = _STATE["ours"] = None
