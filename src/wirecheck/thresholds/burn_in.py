"""The `burn_in` section of thresholds.yaml: the limits only a burn-in has.

A burn-in (`--level burn-in --duration 4h`) holds the GPU-health load in rounds: how long a round
lasts and how many memory-test passes follow it are the GPU-health keys of the burn-in level
(`gpu_health.<mode>.sustained.duration.burn_in`, `gpu_health.<mode>.memory_pattern.passes.burn_in`);
every per-GPU and per-placement limit of acceptance applies to the whole burn-in's figures. What only a
burn-in can judge is here, per mode (hardware / simulated):
- `drift`: how far a GPU's TFLOP/s may fall from its first rounds to its last (a GPU that cannot shed
  its heat loses clocks after minutes, not seconds); `rounds`: how many rounds at each end are compared;
- `busbw_spread`: how far a (placement, collective)'s slowest round may fall below its median round (a
  link that degrades when hot, or retrains under load).
Kept apart from wirecheck.thresholds.file, which holds one field of this type.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from wirecheck.thresholds.yaml_reader import SOURCE_HINT, _At


@dataclass(frozen=True)
class ShareLimit:
    """A fraction (0.1 for "10 %") with where it came from."""

    value: float
    source: str
    yaml_path: str


@dataclass(frozen=True)
class BurnInLimits:
    drift_rounds: int  # rounds at each end of the burn-in whose median TFLOP/s are compared
    _drift: Mapping[bool, ShareLimit]  # keyed by `simulated`: the largest drop allowed, first rounds to last
    _busbw_spread: Mapping[bool, ShareLimit]  # the slowest round below the median round, at most
    yaml_path: str

    def drift(self, simulated: bool) -> ShareLimit:
        return self._drift[bool(simulated)]

    def busbw_spread(self, simulated: bool) -> ShareLimit:
        return self._busbw_spread[bool(simulated)]


def _share(at: _At, key: str, example: str) -> ShareLimit:
    f = at.fields(f"{key} and source", required={key: example, "source": SOURCE_HINT})
    value = f[key].quantity("percent")
    if value >= 1:
        raise f[key].error("is 100 % or more", f"nothing could ever fail; write less than 100 %, e.g. {example}")
    return ShareLimit(value, f["source"].source(), at.cite)


def _per_mode(hardware: _At, simulated: _At, key: str, example: str) -> Mapping[bool, ShareLimit]:
    return MappingProxyType({False: _share(hardware, key, example), True: _share(simulated, key, example)})


def parse_burn_in(at: _At) -> BurnInLimits:
    f = at.fields("burn_in sections", required={
        "drift": '{rounds: 3, hardware: {max_drop: "10 %", source: ...}, simulated: {max_drop: "90 %", source: ...}}',
        "busbw_spread": '{hardware: {max_below_median: "15 %", source: ...}, simulated: {...}}',
    })
    drift = f["drift"].fields("drift settings", required={"rounds": "3", "hardware": '{max_drop: "10 %", source: ...}',
                                                          "simulated": '{max_drop: "90 %", source: ...}'})
    spread = f["busbw_spread"].fields("busbw spread per mode", required={
        "hardware": '{max_below_median: "15 %", source: ...}', "simulated": '{max_below_median: "95 %", source: ...}'})
    return BurnInLimits(
        drift_rounds=drift["rounds"].count(minimum=1),
        _drift=_per_mode(drift["hardware"], drift["simulated"], "max_drop", '"10 %"'),
        _busbw_spread=_per_mode(spread["hardware"], spread["simulated"], "max_below_median", '"15 %"'),
        yaml_path=at.cite,
    )
