"""Copy bandwidth without NCCL (what nvbandwidth measures): pinned host<->device per GPU,
device->device per NVLink pair, and the PCIe link as it runs under load.

One worker process that sees every GPU makes all the copies once, one link at a time (a few
seconds on a 2-GPU node); the tests below judge its figures with the functions in
wirecheck.checks.copy_bandwidth. In simulation every check skips: there is no GPU memory.
"""

from __future__ import annotations

import pytest

from wirecheck import checks
from wirecheck.workers.launcher import WorkerError, WorkerGroup
from wirecheck.node.placement import CLASS_PAIR
from wirecheck.records.file import Measurement
from wirecheck.vocab import records as kinds
from wirecheck.vocab.work import COPIES

pytestmark = [pytest.mark.stage("measure", order=1), pytest.mark.levels("acceptance")]

COPY_WORKER = "wirecheck.measure.copy_bandwidth:measure"


class Copies:
    """The node's copy figures, measured on first use and shared by every test of this module."""

    def __init__(self, node, worker_pool, reporter):
        self.node, self.pool, self.reporter = node, worker_pool, reporter
        self._done = False
        self.result: dict | None = None
        self.error: str | None = None
        self.workers: str | None = None  # where the copies ran: "pool" (a one-GPU node's one worker) or "fresh"

    def get(self) -> "Copies":
        if not self._done and not self.node.simulated:
            self._done = True
            self._measure()
        return self

    def _measure(self) -> None:
        node = self.node
        settings = node.thresholds.copy_bandwidth.settings
        gpus = sorted(node.topology.indices)
        pairs = [list(p.gpus) for p in node.placements if p.klass == CLASS_PAIR]
        kwargs = {"gpus": gpus, "pairs": pairs, "size": settings.size, "warmup_iters": settings.warmup_iters,
                  "iters": settings.iters}
        # On a one-GPU node the pool's one worker (the GPU load's) sees the node's only GPU and nothing else of
        # ours runs: the copies run there. Elsewhere nothing else may be on the GPUs while a link is measured.
        alone = self.pool.alone(tuple(gpus), "copy-bandwidth")
        self.workers = "pool" if alone is not None else "fresh"
        try:
            if alone is not None:
                (self.result,) = alone.run(COPY_WORKER, kwargs, timeout_s=settings.timeout_s, what="copy bandwidth")
            else:
                self.pool.close()
                # One process sees every GPU (peer copies need both in one process), counted as NVML does.
                with WorkerGroup(label="copy-bandwidth", world_size=1, backend=node.backend, gpus=None,
                                 env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                                      "CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus))},
                                 join_process_group=False) as group:
                    (self.result,) = group.run(COPY_WORKER, kwargs, timeout_s=settings.timeout_s,
                                               what="copy bandwidth")
        except WorkerError as exc:
            self.error = str(exc)
            if alone is not None:
                self.pool.close()  # a failed call ends the pool's workers (the next work starts new ones)
        self.reporter.measurement(Measurement(kinds.COPY_BANDWIDTH, None, "copy bandwidth", None, None,
                                              {**(self.result or {}), "workers": self.workers, "error": self.error}))

    def host(self, gpu: int) -> dict | None:
        return next((h for h in (self.result or {}).get("host", []) if h["gpu"] == gpu), None)

    def peer(self, a: int, b: int) -> list:
        return [p for p in (self.result or {}).get("peer", []) if {p["src"], p["dst"]} == {a, b}]


@pytest.fixture(scope="module")
def copies(node, worker_pool, reporter) -> Copies:
    return Copies(node, worker_pool, reporter)


def _pcie(host: dict | None) -> dict | None:
    if not host or not host.get("pcie"):
        return None
    reading = host["pcie"]
    return {**(reading.get("link") or {}), "under_load": reading.get("under_load"), "error": reading.get("error")}


@pytest.mark.work(COPIES)
@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_host_copy(node, topology, gpu, direction, copies, record):
    """Pinned host<->device copies of one GPU at least the floor for the fabric (a slow one names the PCIe link)."""
    c = copies.get()
    host = c.host(gpu)
    verdict = record(checks.copy_bandwidth.host_copy(
        node.thresholds, gpu=gpu, direction=direction, fabric=topology.fabric,
        bytes_per_s=host[f"{direction}_bytes_per_s"] if host else None, pcie=_pcie(host), simulated=node.simulated,
        error=c.error or (None if host else f"GPU{gpu} missing from the copy measurement"), hardware=node.hardware))
    assert verdict.ok, verdict.message


@pytest.mark.work(COPIES)
def test_pcie_link_under_load(node, topology, gpu, copies, record):
    """While host copies run, the PCIe link is at the generation and width it is capable of."""
    verdict = record(checks.copy_bandwidth.pcie_link_under_load(
        node.thresholds, gpu=gpu, pcie=_pcie(copies.get().host(gpu)), simulated=node.simulated))
    assert verdict.ok, verdict.message


def _link_speed(node, a: int, b: int) -> float | None:
    speeds = [link.speed_mbps for g in (a, b) for link in node.topology.gpu(g).nvlinks if link.active and link.speed_mbps]
    if speeds:
        return min(speeds) * 1e6
    return node.profile.nvlink_speed if node.profile else None


@pytest.mark.work(COPIES)
@pytest.mark.placements(CLASS_PAIR)
def test_peer_copy(node, topology, placement, copies, record):
    """Device->device copies between an NVLink pair, both directions, at least the floor."""
    a, b = placement.gpus
    c = copies.get()
    directions = c.peer(a, b)
    verdict = record(checks.copy_bandwidth.peer_copy(
        node.thresholds, pair=placement.id, fabric=topology.fabric, nv=topology.nv_between(a, b),
        link_speed_bytes_per_s=_link_speed(node, a, b), directions=directions, simulated=node.simulated,
        error=c.error or (None if directions else f"{placement.id} missing from the copy measurement"),
        hardware=node.hardware))
    assert verdict.ok, verdict.message
