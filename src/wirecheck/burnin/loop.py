"""The burn-in loop: round after round until the duration is spent, a hard fault stops it, or Ctrl-C.

A round (`gpu_health.<mode>.sustained.duration.burn_in`, the last one cut to what is left): every GPU
under the GEMM load while the collective cycle goes on beside it, in the same processes
(wirecheck.burnin.worker); then the memory test on every GPU (`memory_pattern.passes.burn_in` passes).
NVML samples the whole round in a thread of this process (clocks, power, temperature, clock-event
reasons); ECC counters, remapped rows and link counters are read after it; the session's XID watch is
polled while it runs. As each round ends its figures go to the record (`burn_in_round`, with every
window and NVML sample) and to `on_round` (the progress line): a burn-in that dies at 3 h keeps 3 h.

What stops it (wirecheck.burnin.faults): an XID or ECC event, ECC errors or remapped rows grown since
the burn-in started beyond gpu_health.memory_errors, a GEMM product or a collective element that
differs, a memory word read back wrong, a hang or a crash of the workers. The loop asks the workers to
stop at once (the stop file: they come back within about a window), records the round so far with the
fault, and ends; Ctrl-C does the same, then raises KeyboardInterrupt again for pytest to end the run
(its record then ends `interrupted`). Soft findings are left to the verdicts over all rounds
(wirecheck.burnin.judging).

The loop reaches the node only through a `Rig` (wirecheck.burnin.rig): a self-test gives it a fake.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from wirecheck.burnin import faults, figures
from wirecheck.burnin.faults import Fault
from wirecheck.burnin.plan import BurnInPlan
from wirecheck.node.health import counter_deltas
from wirecheck.node.memory_errors import memory_errors
from wirecheck.records.file import Measurement
from wirecheck.workers.launcher import WorkerError

COMPLETE, STOPPED, INTERRUPTED = "complete", "stopped by a hard fault", "interrupted"
POLL_S = 0.25  # how often XIDs and the stop file are looked at while a round runs
# After Ctrl-C, how long the round may take to come back with what it measured: the workers finish the
# window in flight (two at most are queued) and the step in flight; a second Ctrl-C gives up at once.
STOP_WAIT_WINDOWS = 3
STOP_WAIT_EXTRA_S = 15.0


@dataclass
class RoundReport:
    """What the progress line shows after a round."""

    number: int
    elapsed_s: float
    remaining_s: float
    duration_s: float
    gpus: dict  # gpu -> {"flops_per_s", "temperature_c", "power_w"}
    busbw: tuple | None  # the round's last step: (placement, op, busbw bytes/s)
    fault: Fault | None
    interrupted: bool
    simulated: bool


@dataclass
class BurnIn:
    """A burn-in's result: each round's figures (as recorded, without the time series), how it ended."""

    plan: BurnInPlan
    rounds: list[dict] = field(default_factory=list)
    fault: Fault | None = None
    interrupted: bool = False
    started: float | None = None  # unix time
    ended: float | None = None
    seconds: float = 0.0  # from the first round's start to the last one's end

    @property
    def status(self) -> str:
        return STOPPED if self.fault else INTERRUPTED if self.interrupted else COMPLETE

    def summary(self) -> dict[str, Any]:
        p = self.plan
        return {"status": self.status, "rounds": len(self.rounds), "seconds": round(self.seconds, 1),
                "duration_s": p.duration_s, "round_s": p.round_s, "memory_passes": p.memory_passes,
                "gpus": list(p.gpus), "simulated": p.simulated, "started": self.started, "ended": self.ended,
                "fault": self.fault.as_record() if self.fault else None,
                "cycle": [{"placement": s.placement.id, "op": s.op, "bytes": s.size} for s in p.steps],
                "left_out": dict(p.left_out)}


class _Loop:
    def __init__(self, plan: BurnInPlan, rig, thresholds, record: Callable[[Measurement], None] | None,
                 on_round: Callable[[RoundReport], None] | None, clock: Callable[[], float], poll_s: float):
        self.plan, self.rig, self.th = plan, rig, thresholds
        self.record = record or (lambda m: None)
        self.on_round = on_round or (lambda r: None)
        self.clock, self.poll_s = clock, poll_s
        self.burn = BurnIn(plan)
        self.next_step = 0
        self.baseline: dict | None = None
        self.events_seen = 0
        self.t0 = 0.0

    # -- the whole run ---------------------------------------------------------------------------
    def run(self) -> BurnIn:
        burn, plan = self.burn, self.plan
        burn.started = time.time()
        try:
            try:
                self.rig.start()
            except WorkerError as exc:
                burn.fault = faults.from_error(exc, 0, {}, plan.gpus)
                return burn
            self.baseline = self.rig.health()
            self.events_seen = len(self.rig.xid_events())  # earlier ones are the session's (test_no_xid_during_run)
            self.t0 = self.clock()
            while burn.fault is None:
                remaining = plan.duration_s - (self.clock() - self.t0)
                if remaining < plan.min_round_s:
                    break
                self._round(len(burn.rounds) + 1, min(plan.round_s, remaining))
                if burn.interrupted:
                    raise KeyboardInterrupt
            return burn
        except KeyboardInterrupt:
            burn.interrupted = True
            raise
        finally:
            burn.ended = time.time()
            burn.seconds = self.clock() - self.t0 if self.t0 else 0.0
            try:
                self.rig.close()
            finally:
                self.record(Measurement("burn_in", None, f"burn-in: {burn.status}", len(burn.rounds), "rounds",
                                        burn.summary()))

    # -- one round ------------------------------------------------------------------------------
    def _round(self, number: int, round_s: float) -> None:
        plan, rig, burn = self.plan, self.rig, self.burn
        started = time.time()
        first_event = self.events_seen
        rig.clear_stop()
        sampler = rig.start_sampling()
        fault: Fault | None = None
        interrupted = False
        call = rig.start_round(number, round_s, self.next_step)
        try:
            while not call.wait(self.poll_s):
                if fault is None:
                    fault = self._event_fault(number)
                    if fault is not None:
                        rig.request_stop(fault.describe())
        except KeyboardInterrupt:
            interrupted = True
            rig.request_stop("Ctrl-C")
            call.wait(STOP_WAIT_WINDOWS * plan.window_s + STOP_WAIT_EXTRA_S)  # a second Ctrl-C: out at once
        values, error = call.values, call.error
        error_text = str(error) if error else None
        if values is None and error is None:
            error_text = "interrupted: the round did not come back in time"
        if error is not None and fault is None:
            doing = {p.rank: f"{p.doing} since {time.strftime('%H:%M:%S', time.localtime(p.since))}"
                     for p in rig.progress()}
            fault = faults.from_error(error, number, doing, plan.gpus)
        steps = [s.as_worker_arg(plan.gpus) for s in plan.steps]
        combined = figures.combine_steps(plan.gpus, steps, values) if values and steps else []
        if values:
            self.next_step = values[0].get("next_step", self.next_step)
        for step, result in combined:
            fault = fault or faults.from_step(self.th, step["placement"], step["op"], result, number, step["step"])
        for gpu, value in zip(plan.gpus, values or []):
            fault = fault or faults.from_gemm(self.th, gpu, plan.bus_ids.get(gpu), value.get("math"), number)
        memory: dict[int, dict] = {}
        if fault is None and not interrupted and values and plan.memory_passes:
            try:
                memory = dict(zip(plan.gpus, rig.memory()))
            except WorkerError as exc:
                fault = faults.from_error(exc, number, {}, plan.gpus)
            except KeyboardInterrupt:
                interrupted = True
            for gpu in plan.gpus:
                fault = fault or faults.from_memory(gpu, plan.bus_ids.get(gpu), memory.get(gpu), number)
        phase = figures.load_phase(plan.gpus, values, rig.stop_sampling(sampler), error_text)
        health, fault = self._health(number, fault)
        fault = fault or self._event_fault(number)
        events = rig.xid_events()[first_event:self.events_seen]
        gpus = {}
        run = _run_of(plan)
        for gpu in plan.gpus:
            entry = figures.gpu_round(run, phase, gpu)
            entry["memory"] = _memory_summary(memory.get(gpu))
            gpus[f"GPU{gpu}"] = entry
        details = {
            "round": number, "started": started, "ended": time.time(), "round_s": round_s,
            "elapsed_s": self.clock() - self.t0, "stopped": (values[0].get("stopped") if values else None),
            "gpus": gpus, "collectives": figures.collective_round(combined), "health": health, "events": events,
            "fault": fault.as_record() if fault else None, "interrupted": interrupted, "error": error_text,
        }
        burn.rounds.append(details)
        self.record(Measurement("burn_in_round", None, f"burn-in round {number}", number, "round",
                                {**details, "series": {f"GPU{g}": figures.series(phase, g) for g in plan.gpus}}))
        burn.fault = fault
        burn.interrupted = interrupted
        self.on_round(self._report(number, details, combined, fault, interrupted))

    def _event_fault(self, number: int) -> Fault | None:
        events = self.rig.xid_events()
        fault = faults.from_events(self.th, events[self.events_seen:], number)
        self.events_seen = len(events)
        return fault

    def _health(self, number: int, fault: Fault | None) -> tuple[dict, Fault | None]:
        """ECC, remapped rows and link counters since the burn-in started, per GPU; a fault on ECC growth."""
        now = self.rig.health()
        if not now or not self.baseline:
            return {}, fault
        out = {}
        seconds = self.clock() - self.t0
        for gpu in self.plan.gpus:
            before, after = self.baseline.get(gpu), now.get(gpu)
            if before is None or after is None:
                continue
            grown, unreadable = counter_deltas(before, after)
            out[f"GPU{gpu}"] = {"memory_errors": memory_errors(after),
                                "link_counters": [c for c in grown if c["grew_by"]], "link_counters_read": len(grown)}
            fault = fault or faults.from_health(self.th, gpu, self.plan.bus_ids.get(gpu), before, after, seconds, number)
        return out, fault

    def _report(self, number: int, details: dict, combined: list, fault: Fault | None,
                interrupted: bool) -> RoundReport:
        elapsed = self.clock() - self.t0
        shown = {}
        for gpu in self.plan.gpus:
            g = details["gpus"][f"GPU{gpu}"]
            shown[gpu] = {"flops_per_s": g["flops_per_s"], "temperature_c": g["temperature"]["max_c"],
                          "power_w": g["power_w"]}
        busbw = None
        if combined:
            step, result = combined[-1]
            busbw = (step["placement"], step["op"], result.busbw)
        return RoundReport(number, elapsed, max(0.0, self.plan.duration_s - elapsed), self.plan.duration_s, shown, busbw,
                           fault, interrupted, self.plan.simulated)


def _run_of(plan: BurnInPlan):
    from wirecheck.gpu.load import GpuRun

    return GpuRun(plan.gpus, plan.simulated, plan.names, plan.bus_ids, hardware=plan.hardware)


def _memory_summary(result: dict | None) -> dict | None:
    if not result:
        return None
    keep = ("free_bytes", "total_bytes", "target_bytes", "bytes_covered", "passes", "patterns", "allocation_error",
            "wall_s", "error")
    return {k: result.get(k) for k in keep if k in result}


def run_burn_in(plan: BurnInPlan, rig, thresholds, *, record: Callable[[Measurement], None] | None = None,
                on_round: Callable[[RoundReport], None] | None = None, clock: Callable[[], float] = time.monotonic,
                poll_s: float = POLL_S) -> BurnIn:
    """Run the burn-in `plan` through `rig`; each round's figures go to `record` and `on_round` as it ends.
    Returns how it ended; raises KeyboardInterrupt after recording the round that Ctrl-C cut short."""
    return _Loop(plan, rig, thresholds, record, on_round, clock, poll_s).run()
