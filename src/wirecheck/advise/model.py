"""The step-time model of a data-parallel strategy on a placement, and its fit to a node's runs.

    step = T0 + overhead x bytes + comm - min(hideable comm, overlap x (T0 - optimizer step))

- T0: one rank's compute on its micro-batch: 6 x params x tokens over the GPU's achieved FLOP/s (one GPU
  alone, figures.Compute), less (1 - 1/N) of the optimizer step for a strategy that shards it;
- comm: the strategy's collectives of one step (schedule.py) at the busbw the placement class's
  curve gives at each call's size;
- hideable comm: the collectives issued while compute runs, less each one's last call (nothing runs
  after it: the last gradient bucket fills as backward ends), so a reduction in three 1 GB buckets
  can hide two thirds of itself at most and one in 174 buckets of 25 MiB nearly all;
- overlap: the share of forward and backward under which the hideable collectives can hide (fitted per
  strategy where the wire is slower than the compute: the host path). The optimizer step is no window:
  every collective the step waits for (the gradients' reduction) must end before it, and what follows it
  (ZeRO-1/2's gather of the updated parameters) is not overlapped. Counted as one, a 7B model's 48 ms
  step (a sixth of a 4-GPU step at micro-batch 2, against 6 % of the 1.14B steps the overlap was fitted on)
  would hide communication that nothing runs beside;
- overhead: what the strategy costs beyond its compute and its exposed collectives, in seconds per byte of
  the buffers its collectives reduce and gather in a step (`bytes`: schedule.py's total_bytes summed;
  never negative: a step is never shorter than its compute), fitted per strategy on its fast-wire
  (NVLink) runs, where all of the overlapped communication hides. It is the wrapper's bucket and flatten
  copies, its casts, and what its collectives take from the compute they overlap (SMs and HBM); all of
  that grows with the bytes, none of it with the tokens. The records say so: on the 2x H200 NVLink runs
  DDP's step exceeds its compute by 12.9 ms at micro-batch 8 and by 10.6 ms at 4, where a share of the
  compute (as this model had it) gives 6.5 ms, and every other strategy's excess stays or grows at 4.
  Taken per byte, the article's DDP (bf16 gradients, half this suite's fp32 bytes) pays half the
  overhead, which a share of the compute cannot say. A strategy that shards the optimizer has a smaller
  T0 (figures.Compute.strategy_step_s: the one-GPU step less the optimizer share it does not step),
  which is why ZeRO-1 and FSDP no longer fit below 0. The records hold 2-GPU runs only: how the overhead
  grows with the GPU count (a ring's traffic per rank grows by (N-1)/N) they cannot say; it is taken
  as the bytes' alone.
Why the two fits come from two wires: on NVLink the 2x H200 runs' collectives take 12-20 ms against
a 117 ms step, so every overlap above 0.2 predicts the same step there; only a wire where the
collectives outlast the compute says how much of the compute they can hide under.
"""

from __future__ import annotations

from dataclasses import dataclass

from wirecheck.advise.schedule import Collective

OVERLAP_SCAN = tuple(i / 100 for i in range(0, 151))  # 0 .. 1.5 of T0


@dataclass(frozen=True)
class Fit:
    overhead: float  # seconds per byte of the step's collective buffers (collective_bytes)
    overlap: float  # share of T0
    source: str


@dataclass(frozen=True)
class Timed:
    collective: Collective
    seconds: float
    busbw: float  # bytes/s at its call size
    note: str  # which curve stood in ("" for the exact one)


@dataclass(frozen=True)
class Prediction:
    compute_s: float
    overhead_s: float
    comm_s: float
    overlapped_s: float  # the part of comm that can hide under compute (_hideable)
    window_s: float  # overlap x (T0 - the optimizer step): how much of it can hide
    timed: tuple[Timed, ...]
    tokens_per_gpu: float
    n_gpus: int

    @property
    def hidden_s(self) -> float:
        return min(self.overlapped_s, self.window_s)

    @property
    def step_s(self) -> float:
        return self.compute_s + max(0.0, self.overhead_s) + self.comm_s - self.hidden_s

    @property
    def exposed_s(self) -> float:
        return self.comm_s - self.hidden_s

    @property
    def tokens_per_s(self) -> float:
        return self.n_gpus * self.tokens_per_gpu / self.step_s

    def _exposed_of(self, t: Timed) -> float:
        """One collective's exposed seconds: what the window hid is shared by the hideable parts."""
        hidden = self.hidden_s * _hideable_of(t) / self.overlapped_s if self.overlapped_s else 0.0
        return t.seconds - hidden

    def what_sets_it(self) -> str:
        """compute, or the exposed collective that costs the most, at its call size and busbw."""
        from wirecheck.core.quantity import format_bw, format_bytes

        if self.exposed_s <= 0.1 * self.step_s or not self.timed:
            return f"compute ({self.compute_s * 1e3:.0f} ms); communication hidden"
        worst = max(self.timed, key=self._exposed_of)
        c = worst.collective
        return (f"exposed communication {self.exposed_s * 1e3:.0f} ms: {c.op} of {c.what}, {c.calls} x "
                f"{format_bytes(c.call_bytes)} at {format_bw(worst.busbw)}" + (f" ({worst.note})" if worst.note else ""))


def _hideable_of(t: Timed) -> float:
    c = t.collective
    return t.seconds * (c.calls - 1) / c.calls if c.overlapped else 0.0


def collective_bytes(collectives) -> float:
    """The bytes of the buffers a step's collectives reduce and gather, each as the schedule counts it (a
    gather before forward and again before backward counts twice): what the overhead is paid on."""
    return sum(c.total_bytes for c in collectives)


def comm_times(collectives, n_gpus: int, curve_for) -> tuple[Timed, ...]:
    """`curve_for(op)` -> (Curve, note) of the placement."""
    out = []
    for c in collectives:
        curve, note = curve_for(c.op)
        if curve is None:
            raise ValueError(note)
        out.append(Timed(c, c.seconds(n_gpus, curve.busbw), curve.busbw(c.call_bytes), note))
    return tuple(out)


def predict(collectives, n_gpus: int, curve_for, compute_s: float, fit: Fit, tokens_per_gpu: float,
            optimizer_s: float = 0.0) -> Prediction:
    """`optimizer_s`: the rank's own optimizer step inside `compute_s` (no collective hides under it)."""
    timed = comm_times(collectives, n_gpus, curve_for) if n_gpus > 1 else ()
    comm = sum(t.seconds for t in timed)
    overlapped = _hideable(timed)
    overhead = fit.overhead * collective_bytes(t.collective for t in timed)  # no collective on one GPU: none
    return Prediction(compute_s, overhead, comm, overlapped, fit.overlap * (compute_s - optimizer_s),
                      timed, tokens_per_gpu, n_gpus)


def predict_strategy(figures, name: str, n_params: float, shape: dict, precision: str, klass: str, n_gpus: int,
                     fit: Fit, tokens_per_gpu: float, accounting: str = "implementation") -> Prediction:
    """`name`'s step on `n_gpus` GPUs of placement class `klass`, from the node's (or profile's) curves and
    one-GPU compute (advise/figures.py); its collectives by `accounting` (schedule.py)."""
    from wirecheck.advise.schedule import schedule

    c = figures.compute
    return predict(schedule(name, n_params, shape, precision, accounting), n_gpus, lambda op: figures.curve(op, klass, n_gpus),
                   c.strategy_step_s(name, n_params, tokens_per_gpu, n_gpus), fit, tokens_per_gpu,
                   c.strategy_optimizer_s(name, n_params, n_gpus))


def _hideable(timed) -> float:
    """What of the overlapped collectives can hide: all but each one's last call, which nothing runs after
    (the last gradient bucket fills as backward ends; the last block's gather is what compute waits for)."""
    return sum(_hideable_of(t) for t in timed)


def _split(timed) -> tuple[float, float]:
    return sum(t.seconds for t in timed), _hideable(timed)


def fit_overhead(fast_step_s: float, fast_local_s: float, fast_timed, overlap: float, fast_optimizer_s: float = 0.0) -> float:
    """The overhead per collective byte that makes the model give the fast-wire run's measured step, never below
    0: a strategy adds work to its compute, it cannot remove any (what sharding the optimizer saves is in the
    compute, `fast_local_s`, already), so a step is never shorter than its compute. `fast_optimizer_s`: the
    optimizer step inside `fast_local_s`, under which nothing hides. No collectives: nothing to pay it on."""
    comm, overlapped = _split(fast_timed)
    window = overlap * (fast_local_s - fast_optimizer_s)
    nbytes = collective_bytes(t.collective for t in fast_timed)
    if nbytes <= 0:
        return 0.0
    return max(0.0, (fast_step_s - fast_local_s - comm + min(overlapped, window)) / nbytes)


def fit_overlap(fast, slow) -> float:
    """The overlap share (0..1.5 of T0) with which the fast-wire overhead predicts the slow-wire step best.

    `fast`, `slow`: (step_s, local_s, timed, optimizer_s) of one strategy's runs on the two wires."""
    def error(overlap: float) -> float:
        step, local, timed, optimizer = slow
        fstep, flocal, ftimed, foptimizer = fast
        overhead = fit_overhead(fstep, flocal, ftimed, overlap, foptimizer) * collective_bytes(t.collective for t in timed)
        comm, overlapped = _split(timed)
        return abs(local + overhead + comm - min(overlapped, overlap * (local - optimizer)) - step)

    return min(OVERLAP_SCAN, key=lambda h: (round(error(h), 9), h))
