"""benchmarks/gpu_check.sh (docs/scale.md, "The GPU check") runs and writes its one JSON.

Run in its quick mode on whatever machine runs the tests: without a GPU the GPU rows must
say "no GPU" and hold no numbers; every number measured must be finite.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "benchmarks", "gpu_check.sh")


def _check(path, *args, timeout=300) -> dict:
    pytest.importorskip("jax")
    env = {**os.environ, "PYTHON": sys.executable}
    out = subprocess.run(["bash", SCRIPT, str(path), *args], check=False, capture_output=True,
                         text=True, env=env, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    with open(path) as fh:
        return json.load(fh)


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def test_quick_check_writes_one_json_with_finite_numbers(tmp_path):
    rec = _check(tmp_path / "check.json", "--quick")
    assert rec["mode"] == "quick" and rec["elapsed_s"] <= rec["budget_s"]
    gpu = rec["devices"]["gpu"]
    assert isinstance(gpu, bool) and rec["devices"]["devices"]
    rows = rec["throughput"]
    assert {(r["model"], r["backend"]) for r in rows} == {
        ("pima", "cpu"), ("pima", "gpu"), ("big", "cpu"), ("big", "gpu")
    }
    for r in rows:
        if r["backend"] == "gpu" and not gpu:  # explicit, and no numbers
            assert r["status"] == "no GPU" and "particles_per_s" not in r
            continue
        assert r["status"] == "ok", r
        assert _finite(r["particles_per_s"]) and r["particles_per_s"] > 0
        assert _finite(r["call_s"]) and _finite(r["peak_rss_mb"])
        assert r["device"].startswith("cpu") == (r["backend"] == "cpu")
        # the device's peak memory, or null with the reason
        assert _finite(r["device_peak_mb"]) or (r["device_peak_mb"] is None
                                                and r["device_memory_note"])
    run = rec["run"]
    assert run["status"].startswith("ok"), run
    assert run["backend"] == "jax" and run["chains"] == 2
    for key in ("log_z", "mcse", "wall_s", "peak_rss_mb", "default_budget_mb"):
        assert _finite(run[key]), key
    assert run["mcse"] > 0 and run["log_z"] < 0
    assert isinstance(run["peak_rss_within_default_budget"], bool)
    if not gpu:
        assert run["device"].startswith("cpu") and run["device_peak_mb"] is None
        assert "CPU" in run["device_memory_note"]


def test_check_keeps_its_time_budget(tmp_path):
    """With no time left the parts are skipped, not run, and the JSON is still written."""
    rec = _check(tmp_path / "check.json", "--quick", "--budget-s", "4", timeout=60)
    assert rec["elapsed_s"] <= 4
    assert all(r["status"] in ("skipped", "no GPU") for r in rec["throughput"])
    assert rec["run"]["status"] == "skipped"


def test_with_a_gpu_the_gpu_parts_come_first_and_a_cpu_fallback_is_an_error(tmp_path,
                                                                             monkeypatch):
    """The order and bookkeeping of the parts on a machine with a GPU, the workers replaced by
    a stand-in that records its calls (no JAX needed): the unblocked GPU call is added, the run
    comes before the big CPU call, and a "GPU" row that ran on the CPU is not reported as
    a GPU number."""
    monkeypatch.syspath_prepend(os.path.dirname(SCRIPT))
    import gpu_check

    calls = []

    def fake_run_one(spec, timeout, env=None):
        on_gpu = "JAX_PLATFORMS" not in (env or {})
        calls.append((spec["kind"], spec["rows"], on_gpu, spec.get("memory_budget")))
        device = "cpu:0" if spec["kind"] == "call" else ("cuda:0" if on_gpu else "cpu:0")
        return {**spec, "device": device, "call_s": 0.5, "peak_rss_mb": 900.0, "log_z": -1.0,
                "mcse": 0.1, "wall_s": 1.0}

    gpu = {"gpu": True, "devices": ["cuda:0"], "note": "GPU: H100"}
    monkeypatch.setattr(gpu_check, "probe_devices", lambda timeout: gpu)
    monkeypatch.setattr(gpu_check.bench_bigdata, "run_one", fake_run_one)
    rec = gpu_check.main(["--json", str(tmp_path / "c.json"), "--quick"])
    assert [c[:3] for c in calls] == [
        ("call", 768, False), ("call", 768, True), ("call", 20000, True),
        ("call", 20000, True), ("run", 2000, True), ("call", 20000, False),
    ]
    assert calls[3][3] == gpu_check.UNBLOCKED_BUDGET
    by = {(r["model"], r["backend"], r["memory_budget"]): r for r in rec["throughput"]}
    assert by[("pima", "cpu", None)]["status"] == "ok"
    assert by[("pima", "cpu", None)]["particles_per_s"] == 64 / 0.5
    gpu_row = by[("pima", "gpu", None)]  # the stand-in "GPU" call ran on cpu:0
    assert gpu_row["status"] == "error" and "particles_per_s" not in gpu_row
    assert rec["run"]["status"] == "ok" and rec["run"]["peak_rss_within_default_budget"]
    with open(tmp_path / "c.json") as fh:
        assert json.load(fh)["run"]["device"] == "cuda:0"
