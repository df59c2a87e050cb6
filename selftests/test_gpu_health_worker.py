"""The GPU load's worker functions, called in this process on CPU with small sizes: the figures,
the comparison with the reference (one wrong element caught with its index, under load too),
the sustained windows, and the memory pattern test (one wrong word caught with its offset)."""

from __future__ import annotations

import sys
import threading
import time
import types

import pytest
import torch

from wirecheck.gpu import gemm, memory_pattern, worker
from wirecheck.gpu.inputs import full_windows

try:  # selftests/ may or may not be a package
    from selftests.faulty_gpu_worker import wrong_after_reference
except ModuleNotFoundError:
    from faulty_gpu_worker import wrong_after_reference

CTX = types.SimpleNamespace(rank=0, device=torch.device("cpu"))
N = 64
FIGURES = {"hbm": {"size": 2**20, "warmup_iters": 1, "iters": 3},
           "gemm": {"n": N, "warmup_iters": 1, "iters": 3, "compare_iters": 4}, "seed": 20}


def test_figures_on_cpu():
    out = worker.figures(CTX, **FIGURES)
    hbm = out["hbm"]
    assert hbm["size"] == 2**20 and hbm["copy"]["per_s"] > 0 and hbm["read"]["per_s"] > 0
    assert hbm["copy"]["calls"] == 3 and hbm["copy"]["best_per_s"] >= hbm["copy"]["per_s"]
    bf16 = out["gemm_bf16"]
    assert bf16["throughput"]["per_s"] > 0 and bf16["math"]["checked"] == 4
    assert bf16["math"]["mismatched_results"] == 0 and bf16["math"]["reference_nonfinite"] == 0
    assert out["gemm_fp8"]["unsupported"].startswith("fp8 GEMMs need a GPU")
    # the same seed gives the same reference, whichever call computes it
    assert gemm.digest(gemm.reference(N, 20, CTX.device)["ref"]) == bf16["math"]["reference_digest"]


def test_one_wrong_element_is_counted_with_its_index(monkeypatch):
    monkeypatch.setattr(gemm, "matmul", wrong_after_reference(gemm.matmul, index=N + 3))
    math = worker.figures(CTX, **FIGURES)["gemm_bf16"]["math"]
    assert (math["mismatched_results"], math["mismatched_elements"]) == (4, 4)
    assert math["first"] == {"result": 1, "index": N + 3, "row": 1, "col": 3}


def test_the_sustained_load_reports_windows_and_catches_a_wrong_element(monkeypatch):
    out = worker.sustained(CTX, n=N, duration_s=0.3, window_s=0.1, check_every=2, seed=20)
    windows = full_windows(out)
    assert windows and all(w["flops_per_s"] > 0 and w["t1"] > w["t0"] for w in windows)
    # back to back for the duration (a shared CPU's speed varies: the last window may run over)
    assert all(b["t0"] >= a["t1"] - 0.01 for a, b in zip(out["windows"], out["windows"][1:]))
    assert 0.25 < out["windows"][-1]["t1"] - out["windows"][0]["t0"] < 5
    assert out["math"]["checked"] > 0 and out["math"]["mismatched_results"] == 0

    monkeypatch.setattr(gemm, "matmul", wrong_after_reference(gemm.matmul, index=7))
    wrong = worker.sustained(CTX, n=N, duration_s=0.1, window_s=0.05, check_every=2, seed=20)["math"]
    assert wrong["mismatched_results"] == wrong["checked"] > 0
    assert wrong["first"] == {"window": 0, "index": 7, "row": 0, "col": 7}


def test_the_memory_test_covers_its_share_and_names_the_first_bad_word(monkeypatch):
    ok = worker.memory(CTX, coverage=0.9, chunk=2**20, cap=4 * 2**20, passes=1)
    assert ok["bytes_covered"] == int(0.9 * 4 * 2**20) // 8 * 8 and ok["free_bytes"] == 4 * 2**20
    assert [p["pattern"] for p in ok["patterns"]] == ["0xAA", "0x55", "zeros", "ones", "address"]
    assert all(p["mismatched_words"] == 0 for p in ok["patterns"])

    right = memory_pattern.fill

    def one_word_wrong(chunk, value, first_word):
        right(chunk, value, first_word)
        if value is None and first_word > 0:  # the second chunk, address pattern
            chunk[10] += 1

    monkeypatch.setattr(memory_pattern, "fill", one_word_wrong)
    bad = worker.memory(CTX, coverage=0.9, chunk=2**20, cap=4 * 2**20, passes=1)
    address = bad["patterns"][-1]
    assert address["mismatched_words"] == 3  # one per chunk after the first
    assert address["first_bad_offset"] == 2**20 + 10 * 8


def test_on_a_device_the_last_window_ends_with_the_duration_not_a_window_past_it(monkeypatch):
    """The device runs queued products while the host waits on the window before (a simulated device at 1000
    products/s and its clock): the last window is sized to the time left, so the load ends with the duration, where
    a last full window would run up to a whole window (1 s) past it."""
    from wirecheck.gpu import sustained

    class Clock:
        now = 100.0

        def time(self):
            return self.now

    clock, rate, queued = Clock(), 1000.0, []
    device_free = [clock.now]  # when the simulated device has done everything queued so far

    def queue(a, b, ref, out, products, check_every, watch, host):
        start = max(clock.now, device_free[0])
        device_free[0] = start + products / rate
        queued.append(products)
        return types.SimpleNamespace(products=products, start=start, end=device_free[0])

    def finish(w, watch, n):
        clock.now = max(clock.now, w.end)
        return {"t0": w.start, "t1": w.end, "products": w.products, "seconds": w.end - w.start,
                "flops_per_s": 1.0, "checked": 0, "mismatched_results": 0, "mismatched_elements": 0}, None

    monkeypatch.setattr(sustained, "time", clock)
    monkeypatch.setattr(sustained, "queue_window", queue)
    monkeypatch.setattr(sustained, "finish_window", finish)
    monkeypatch.setattr(sustained, "Stopwatch", lambda device: types.SimpleNamespace(cuda=True))
    monkeypatch.setattr(sustained, "gemm", types.SimpleNamespace(
        reference=lambda n, seed, device: {"a": None, "b": None, "ref": None, "out": None, "nonfinite": 0},
        digest=lambda ref: "d"))
    out = sustained.run(torch.device("cpu"), n=8, duration_s=10.0, window_s=1.0, check_every=8, seed=0)
    end = out["windows"][-1]["t1"] - out["began"]
    assert 10.0 <= end < 10.05, (end, queued)  # a last full window would end up to 11 s
    assert sum(queued) == pytest.approx(10.0 * rate, abs=16)
    full = full_windows(out)
    assert full and all(w["seconds"] >= 0.5 for w in full)  # a short last window is left out of the figure



def test_the_aside_runs_once_in_a_thread_of_its_own_while_the_load_goes_on():
    """The one-GPU training's preparation (the aside) runs once, after a full window, in another thread, with
    Python's switch interval short so the load's thread gets the interpreter back at once; the load keeps
    queuing windows meanwhile (windows ran during it), the interval is restored after it, and the record keeps
    its result, seconds and the windows it overlapped."""
    from wirecheck.gpu import sustained

    seen = []

    def aside():
        seen.append((threading.current_thread() is threading.main_thread(), sys.getswitchinterval()))
        time.sleep(1.0)  # host work that gives the interpreter up (as torch's ops and the compiler do)
        return {"prepared": True}

    interval = sys.getswitchinterval()
    out = sustained.run(torch.device("cpu"), n=N, duration_s=2.5, window_s=0.1, check_every=8, seed=0, aside=aside)
    ((on_main, during),) = seen
    assert not on_main and during == pytest.approx(sustained.ASIDE_SWITCH_S) and sys.getswitchinterval() == interval
    a = out["aside"]
    assert a["result"] == {"prepared": True} and a["error"] is None and a["seconds"] >= 1.0
    first, last = a["windows"]
    first_full = next(i for i, w in enumerate(out["windows"]) if w["seconds"] >= 0.05)
    assert first > first_full and last - first >= 1, (a, [round(w["seconds"], 3) for w in out["windows"]])


def test_an_aside_starts_by_half_the_load_even_where_no_window_runs_full():
    """On a busy host a short load's windows may never reach half of window_s: the aside waited for one and never
    ran (a self-test beside other workers failed so). It starts by half the load at the latest."""
    from wirecheck.gpu import sustained

    out = sustained.run(torch.device("cpu"), n=N, duration_s=0.6, window_s=30.0, check_every=8, seed=0,
                        aside=lambda: {"ran": True})
    assert out["aside"] is not None and out["aside"]["result"] == {"ran": True}, out["aside"]


def test_the_load_waits_for_an_aside_that_outlasts_it():
    """An aside longer than the load still ends before the load returns (its kernels and memory are the load's
    to release), with its seconds in the record."""
    from wirecheck.gpu import sustained

    t0 = time.perf_counter()
    out = sustained.run(torch.device("cpu"), n=N, duration_s=0.5, window_s=0.05, check_every=8, seed=0,
                        aside=lambda: time.sleep(1.0) or {"slept": 1.0})
    assert time.perf_counter() - t0 >= 1.0 and out["aside"]["seconds"] >= 1.0 and out["aside"]["error"] is None

def test_a_failing_aside_is_recorded_and_the_load_goes_on(monkeypatch):
    """The training's preparation failing (an import error, out of memory) costs the load nothing: the error is
    in the result and every window is still measured; without an aside the result says none ran."""
    from wirecheck.gpu import sustained

    def broken():
        raise RuntimeError("CUDA out of memory")

    out = sustained.run(torch.device("cpu"), n=N, duration_s=1.5, window_s=0.25, check_every=8, seed=0, aside=broken)
    assert out["aside"]["error"] == "RuntimeError: CUDA out of memory" and out["aside"]["result"] is None
    # the windows still cover the load (their count is the host's: on a busy 2-core machine one window took 1.6 s)
    windows = full_windows(out)
    assert windows and sum(w["seconds"] for w in windows) >= 0.75 and out["math"]["mismatched_results"] == 0
    assert sustained.run(torch.device("cpu"), n=N, duration_s=0.3, window_s=0.1, check_every=8, seed=0)["aside"] is None


def test_the_worker_calls_the_aside_on_its_first_rank_only():
    """worker.sustained resolves the aside's function and calls it with the rank's context on the first rank;
    another rank runs the load alone."""
    spec = {"function": "wirecheck.training.single_gpu:prepare",
            "kwargs": {"shape": {"n_layer": 1, "n_head": 2, "d_model": 32, "vocab_size": 64, "seq_len": 16},
                       "micro_batch": 2, "precision": "bf16", "optimizer": "fused"}}
    load = {"n": N, "duration_s": 1.0, "window_s": 0.2, "check_every": 8, "seed": 0}
    out = worker.sustained(CTX, **load, aside=spec)
    assert out["aside"]["error"] is None and out["aside"]["result"]["seconds"] > 0, out["aside"]
    other = types.SimpleNamespace(rank=1, device=torch.device("cpu"))
    assert worker.sustained(other, **load, aside=spec)["aside"] is None


def test_an_aside_that_never_ends_is_left_to_itself_and_said_so(monkeypatch):
    """An aside stuck past the load's wait (a driver call that never returns) does not hang the load: the result
    says so, the switch interval is back to its own, and the windows stand."""
    from wirecheck.gpu import sustained

    monkeypatch.setattr(sustained, "ASIDE_WAIT_S", 0.2)
    release = threading.Event()
    interval = sys.getswitchinterval()
    out = sustained.run(torch.device("cpu"), n=N, duration_s=0.5, window_s=0.05, check_every=8, seed=0,
                        aside=lambda: release.wait(30) and {})
    try:
        assert out["aside"]["error"].startswith("still running") and out["aside"]["result"] is None
        assert sys.getswitchinterval() == interval and len(full_windows(out)) >= 2
    finally:
        release.set()
