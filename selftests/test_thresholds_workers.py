"""thresholds.yaml `workers:`: deadline rules and the node lock's wait load, and break clearly."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from wirecheck.thresholds.file import ThresholdsError, load_thresholds

SHIPPED = Path(__file__).resolve().parents[1] / "thresholds.yaml"


@pytest.fixture(scope="module")
def shipped_data():
    return yaml.load(SHIPPED.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def test_shipped_worker_settings():
    th = load_thresholds(SHIPPED)
    hw, sim = th.workers.deadline_rule(False), th.workers.deadline_rule(True)
    assert (hw.minimum_s, hw.safety_factor) == (10.0, 10.0)
    assert hw.yaml_path == "thresholds.yaml: workers.deadlines.hardware" and hw.source
    assert sim.minimum_s <= th.collective_settings(True).timeout_s and sim.source
    assert th.workers.lock_wait_s == 30.0 and th.workers.lock_source
    assert th.workers.lock_yaml_path == "thresholds.yaml: workers.node_lock"


def test_slowest_floor_is_the_slowest_wire_in_the_file():
    th = load_thresholds(SHIPPED)
    slowest = th.slowest_busbw_floor("all_reduce", simulated=False)
    hw_floors = [th.busbw_limit(c, "all_reduce", n, False) for c in ("nvswitch", "cross_quad", "forced_pcie", "pcie")
                 for n in (2, 4, 8)]
    assert slowest.min == min(f.min for f in hw_floors if f is not None)
    assert th.slowest_busbw_floor("all_reduce", simulated=True).min == th.busbw_limit("nvswitch", "all_reduce", 2, True).min


def _error(tmp_path, data) -> str:
    path = tmp_path / "thresholds.yaml"
    path.write_text(yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False))
    with pytest.raises(ThresholdsError) as info:
        load_thresholds(path)
    message = str(info.value)
    assert str(path) in message
    return message


def _hw(data):
    return data["workers"]["deadlines"]["hardware"]


BROKEN = {
    "missing section": (lambda d: d.pop("workers"), ["missing required key 'workers'", "add workers:"]),
    "minimum without unit": (lambda d: _hw(d).update(minimum=10),
                             ['workers.deadlines.hardware.minimum: "10" has no unit', 'write "10 s"']),
    "factor as a time": (lambda d: _hw(d).update(safety_factor="10 s"),
                         ['workers.deadlines.hardware.safety_factor: "10 s" is a duration, not a ratio']),
    "factor below 1": (lambda d: _hw(d).update(safety_factor="0.5 x"),
                       ['workers.deadlines.hardware.safety_factor: "0.5 x" is below 1 x', 'at least "1 x"']),
    "no source": (lambda d: _hw(d).pop("source"),
                  ["workers.deadlines.hardware: missing required key 'source'"]),
    "simulated rule missing": (lambda d: d["workers"]["deadlines"].pop("simulated"),
                               ["workers.deadlines: missing required key 'simulated'"]),
    "typo in the lock": (lambda d: d["workers"]["node_lock"].update(wiat="1 s"),
                         ["workers.node_lock.wiat: unknown key", "did you mean 'wait'?"]),
    "negative wait": (lambda d: d["workers"]["node_lock"].update(wait="-1 s"),
                      ['workers.node_lock.wait: "-1 s" is negative']),
    # "120 ms" for "120 s": every call would be taken for a hang, and the node drained for a typo
    "a call's timeout below a second": (lambda d: d["collectives"]["simulated"].update(timeout="120 ms"),
                                        ['collectives.simulated.timeout: "120 ms" is below 1 s', 'e.g. "120 s"']),
}


@pytest.mark.parametrize("mutate, fragments", list(BROKEN.values()), ids=list(BROKEN))
def test_broken_worker_settings_name_path_and_fix(tmp_path, shipped_data, mutate, fragments):
    data = copy.deepcopy(shipped_data)
    mutate(data)
    message = _error(tmp_path, data)
    for fragment in fragments:
        assert fragment in message, message
