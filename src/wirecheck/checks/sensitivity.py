"""Each rule's resolution for a figure, by resampling clean runs: the loss it catches in 95 % of runs and
the share of clean runs it fails (wirecheck.core.resolution), for the fixed floors (a table entry, a
derived or a calibrated floor), the history rule, the node's peers and the fleet.

The noise is the figure's own, as the runs measured it: each subject's (GPU's, placement's) runs give
their deviations from that subject's mean (scaled by sqrt(n / (n - 1)) so that a subject with three runs
does not understate its noise), pooled over the subjects; the subjects' means give the spread between
GPUs of a model, which only the fixed floors, the peers and the fleet see. A resampled run is a subject's
level times one plus a pooled deviation, jittered by a normal kernel as wide as the larger of the
figure's within-run noise (its repeats) and Silverman's bandwidth of the pooled deviations: a smoothed
bootstrap, so that nine recorded runs give a distribution and not only nine values (it widens the noise
a little: the false alarms it finds are, if anything, too many).

Every rule is reduced to the critical loss of each resampled run (1 - the rule's bound / the run's
figure): the share at or below 0 is its false-alarm rate, the share at or below a loss `s` the share of
runs slowed by `s` it catches, and its 95th percentile its resolution. `wirecheck calibrate` calls this
on the site's runs; scripts/bench/sensitivity.py on the committed reference runs, with slow ramps too.
Deterministic: every draw comes from a seeded generator.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Callable, Sequence

from wirecheck.checks.history import margin_of
from wirecheck.core.peer_stats import below_median
from wirecheck.core.resolution import Resolution, critical_loss, from_critical

DRAWS = 2000  # resampled runs per rule: the 95th percentile and a 1 % rate to about +-0.4 %


@dataclass(frozen=True)
class Noise:
    """A figure's measured noise: pooled deviations of runs from their subject's mean, the subjects' means,
    the within-run noise of each run where the records keep it."""

    deviations: tuple[float, ...]  # relative, pooled over subjects
    levels: tuple[float, ...]  # each subject's mean (base units)
    within: tuple[float, ...]  # relative standard errors within runs
    runs: int
    sd: float = 0.0  # of the pooled deviations
    bandwidth: float = 0.0  # Silverman's rule of thumb for them: the smoothing kernel's least width

    @classmethod
    def of(cls, series: Sequence[Sequence[float]], within: Sequence[float | None] = ()) -> "Noise":
        """From each subject's clean values (subjects with one run give a level but no deviation)."""
        deviations, levels = [], []
        for values in series:
            values = [float(v) for v in values if v and v > 0]
            if not values:
                continue
            mean = statistics.fmean(values)
            levels.append(mean)
            n = len(values)
            if n >= 2:
                deviations += [(v / mean - 1.0) * math.sqrt(n / (n - 1)) for v in values]
        if not levels:
            raise ValueError("no clean readings to measure a noise from")
        n = len(deviations)
        sd = statistics.pstdev(deviations) if n >= 2 else 0.0
        bandwidth = 0.0
        if n >= 2:
            q = statistics.quantiles(deviations, n=4) if n >= 4 else [0.0, 0.0, 0.0]
            bandwidth = 0.9 * (min(sd, (q[2] - q[0]) / 1.34) or sd) * n ** -0.2
        return cls(tuple(deviations), tuple(levels), tuple(w for w in within if w and w > 0),
                   sum(len(s) for s in series), sd, bandwidth)

    @property
    def between(self) -> float:
        """The spread of the subjects' levels (relative standard deviation): GPU to GPU of a model."""
        if len(self.levels) < 2:
            return 0.0
        return statistics.stdev(self.levels) / statistics.fmean(self.levels)

    def deviation(self, rng: random.Random) -> float:
        """One resampled run's relative deviation from its subject's level."""
        e = rng.choice(self.deviations) if self.deviations else 0.0
        width = max(rng.choice(self.within) if self.within else 0.0, self.bandwidth)
        return e + (rng.gauss(0.0, width) if width > 0 else 0.0)

    def run(self, rng: random.Random, level: float = 1.0) -> float:
        return level * (1.0 + self.deviation(rng))

    def within_of(self, rng: random.Random) -> float | None:
        return rng.choice(self.within) if self.within else None

    def describe(self) -> str:
        subjects = len(self.levels)
        return (f"{self.runs} clean runs on {subjects} {'GPU or placement' if subjects == 1 else 'GPUs or placements'}, "
                f"resampled")


def caught(losses: Sequence[float], step: float) -> float:
    """The share of runs slowed by `step` the rule fails (critical loss at or below it)."""
    return sum(1 for s in losses if s <= step) / len(losses)


# -- the rules, each as critical losses ------------------------------------------------------------


def floor_losses(noise: Noise, floor: float, draws: int = DRAWS, seed: int = 1) -> list[float]:
    """A fixed floor (base units) over runs of any subject: a level drawn from the subjects measured."""
    rng = random.Random(seed)
    return [critical_loss(noise.run(rng, rng.choice(noise.levels)), floor) for _ in range(draws)]


def calibrated_losses(noise: Noise, floor_of: Callable[[list[float]], float], runs: int, draws: int = DRAWS,
                      seed: int = 2) -> list[float]:
    """A floor calibrated from `runs` resampled clean runs (`floor_of`: the calibration rule), then a new run
    of a subject drawn again: what a site gets calibrating from that many runs of nodes like these."""
    rng = random.Random(seed)
    out = []
    for _ in range(draws):
        calibration = [noise.run(rng, rng.choice(noise.levels)) for _ in range(runs)]
        out.append(critical_loss(noise.run(rng, rng.choice(noise.levels)), floor_of(calibration)))
    return out


def history_losses(noise: Noise, rule, runs: int | None = None, draws: int = DRAWS, seed: int = 3,
                   figure: str | None = None) -> list[float]:
    """The history rule (thresholds' `history:`, checks.history.margin_of) with `runs` earlier runs (default
    its `runs`) of one subject, then this run; `figure`: its name, for its own least margin."""
    rng = random.Random(seed)
    runs = runs or rule.runs
    out = []
    for _ in range(draws):
        past = [noise.run(rng) for _ in range(runs)]
        within = [noise.within_of(rng) for _ in range(runs + 1)]
        m = margin_of(rule, past, within, figure)
        if m.margin > rule.max_margin:
            out.append(math.inf)  # said too noisy, not judged: no loss fails it
            continue
        out.append(critical_loss(noise.run(rng), statistics.median(past) * (1 - m.margin)))
    return out


def peer_losses(noise: Noise, max_below_median: float, mad_k: float, gpus: int = 8, draws: int = DRAWS,
                seed: int = 4) -> list[float]:
    """The below-its-peers rule (wirecheck.core.peer_stats) on a node of `gpus` GPUs whose levels are drawn
    from the subjects measured (the spread between GPUs of the model) and whose runs are noisy as measured."""
    rng = random.Random(seed)
    out = []
    for _ in range(draws):
        others = [noise.run(rng, rng.choice(noise.levels)) for _ in range(gpus - 1)]
        value = noise.run(rng, rng.choice(noise.levels))
        ref = below_median(value, others, max_below_median, mad_k)
        bound = ref.median - max(max_below_median * ref.median, mad_k * ref.scaled_mad)
        out.append(critical_loss(value, bound))
    return out


def resolution(losses: Sequence[float], noise: Noise) -> Resolution:
    return from_critical(losses, noise.describe())


def shipped_floors(thresholds, key: str, hardware=None, link_ceiling: float | None = None) -> dict:
    """{"measured": the file's table floor, "derived": one derived from the hardware's peaks} in base units for
    the figure whose floor sits at `key` (records.figures.Figure.yaml_path), where the file gives one for that
    hardware (wirecheck.node.hardware.Hardware; `link_ceiling`: a placement's NV# x per-link speed)."""
    parts = key.split(".")
    found = []
    if parts[0] == "gpu_health" and len(parts) == 4:
        found.append(thresholds.gpu_health.floor_rule(parts[3], parts[2], False, hardware)[0])
        if hardware is not None:  # the same GPU as if the table did not name its model
            found.append(thresholds.gpu_health.floor_rule(parts[3], "", False, hardware)[0])
    elif parts[0] == "collectives" and parts[1] == "floors" and len(parts) == 5:
        found.append(thresholds.busbw_rule(parts[2], parts[3], int(parts[4]), False, link_ceiling, None)[0])
        if link_ceiling and parts[2] not in ("pcie", "forced_pcie", "network"):
            eff, _, _ = thresholds.derived_floor.for_op(parts[3])
            found.append(_Derived(eff * link_ceiling))
    elif parts[0] == "copy_bandwidth" and len(parts) == 4:
        found.append(thresholds.copy_bandwidth.limit_rule(parts[2], parts[3], None, hardware)[0])
    elif parts[:2] == ["training", "single_gpu_throughput_floors"]:
        found.append(thresholds.training_limits(False).single_gpu_floor(parts[2]))
    elif parts[:2] == ["training", "throughput_floors"] and len(parts) == 5:
        found.append(thresholds.training_limits(False).throughput_rule(parts[2], parts[3], int(parts[4]), hardware)[0])
    out: dict = {}
    for limit in found:
        if limit is not None and getattr(limit, "min", None):
            # the table floor is `measured` here whichever rule made it (a guess, a site's): the rules these
            # resolutions are kept under (thresholds.limits.RESOLUTION_KEYS, the recorded file's) are the rules
            # that judge, and the table is one of them
            out.setdefault("derived" if getattr(limit, "rule", None) == "derived" else "measured", limit.min)
    return out


@dataclass(frozen=True)
class _Derived:
    min: float
    rule: str = "derived"


def rule_resolutions(noise: Noise, thresholds, key: str, hardware=None, link_ceiling: float | None = None,
                     draws: int = DRAWS) -> dict:
    """rule -> Resolution of the rules that can judge the figure at `key` besides a calibrated floor and the
    history: the file's table floor (`measured`) and a derived one, the node's peers (GPU figures, a node of 8),
    the fleet (50 nodes), on `noise`."""
    out = {}
    for rule, floor in shipped_floors(thresholds, key, hardware, link_ceiling).items():
        out[rule] = resolution(floor_losses(noise, floor, draws), noise)
    fleet = thresholds.fleet(False)
    if key.startswith("gpu_health"):
        peers = thresholds.gpu_health.peers(False)
        out["peers"] = resolution(peer_losses(noise, peers.max_below_median, peers.mad_k, 8, draws), noise)
        rule = fleet.gpus
    else:
        rule = fleet.busbw if key.startswith(("collectives", "copy_bandwidth")) else fleet.throughput
    out["fleet"] = resolution(peer_losses(noise, rule.max_below_median, rule.mad_k, 50, draws), noise)
    return out
