"""The node's network as plain data: NIC ports (state, rate), GPU-to-NIC paths, and the line rate a
multi-node job can use.

Read without touching a GPU: InfiniBand/RoCE ports from /sys/class/infiniband, Ethernet from
/sys/class/net, GPU-to-NIC paths from the NIC columns of `nvidia-smi topo -m` (live, or the recorded
text of a simulated topology). Everything comes back as dicts of JSON values, so verdicts and records
carry it unchanged and `wirecheck judge` can judge it again.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from wirecheck.node.topology import PCIE_LEVELS

INFINIBAND, ROCE, ETHERNET = "infiniband", "roce", "ethernet"
RDMA_KINDS = (INFINIBAND, ROCE)
# /sys/class/net/<if>/type: ARPHRD_ETHER. IPoIB (32) is the InfiniBand port again, counted there.
_ARPHRD_ETHER = "1"
_RATE = re.compile(r"^\s*([0-9.]+)\s*Gb/sec")
_ANSI = re.compile(r"(?:\x1b|\ufffd)?\[[0-9;]*m")
_GPU_LABEL = re.compile(r"GPU\d+")
_NIC_LEGEND_ENTRY = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
TOPO_TIMEOUT_S = 30


@dataclass(frozen=True)
class Port:
    """One NIC port. `rate_bytes_per_s` per direction; None when the kernel does not say."""

    name: str  # "mlx5_0/1" (RDMA device/port) or "eth0" (Ethernet interface)
    device: str  # "mlx5_0" or "eth0": what topo -m's NIC legend names
    kind: str  # infiniband | roce | ethernet
    state: str | None  # ACTIVE, DOWN, INIT ... (RDMA); up, down (Ethernet operstate)
    phys_state: str | None  # LinkUp, Polling, Disabled ... (RDMA only)
    rate_bytes_per_s: float | None
    rate_text: str | None  # as sysfs wrote it: "400 Gb/sec (4X NDR)", "100000 Mb/s"
    device_id: str | None  # what the sysfs `device` link points at: a PCI address, or e.g. virtio2 in a VM

    @property
    def up(self) -> bool:
        if self.kind in RDMA_KINDS:
            return self.state == "ACTIVE" and self.phys_state in (None, "LinkUp")
        return self.state == "up"


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:  # absent, or EINVAL (speed of an interface that is down)
        return None


def _after_colon(text: str | None) -> str | None:
    """sysfs writes "4: ACTIVE", "5: LinkUp": keep the word."""
    if text is None:
        return None
    return text.split(":", 1)[1].strip() if ":" in text else text


def parse_ib_rate(text: str | None) -> float | None:
    """ "400 Gb/sec (4X NDR)" -> bytes/s per direction (Gb/s are 1e9 bits)."""
    m = _RATE.match(text or "")
    return float(m.group(1)) * 1e9 / 8 if m else None


def _device_id(device_link: Path) -> str | None:
    try:
        return os.path.basename(os.path.realpath(device_link)) if device_link.exists() else None
    except OSError:
        return None


def read_ports(root: str | Path = "/") -> list[Port]:
    """Every RDMA port, then every physical Ethernet interface that is not an RDMA device's own.

    `root` is the filesystem root (a self-test points it at a fake sysfs tree)."""
    root = Path(root)
    ports: list[Port] = []
    rdma_netdevs: set[str] = set()
    ib = root / "sys/class/infiniband"
    for dev in sorted(ib.iterdir()) if ib.is_dir() else []:
        for netdev in (dev / "device/net").iterdir() if (dev / "device/net").is_dir() else []:
            rdma_netdevs.add(netdev.name)
        for port in sorted((dev / "ports").iterdir(), key=lambda p: p.name) if (dev / "ports").is_dir() else []:
            layer = _read(port / "link_layer")
            rate_text = _read(port / "rate")
            ports.append(Port(
                name=f"{dev.name}/{port.name}", device=dev.name,
                kind=ROCE if layer == "Ethernet" else INFINIBAND,
                state=_after_colon(_read(port / "state")), phys_state=_after_colon(_read(port / "phys_state")),
                rate_bytes_per_s=parse_ib_rate(rate_text), rate_text=rate_text, device_id=_device_id(dev / "device")))
    net = root / "sys/class/net"
    for iface in sorted(net.iterdir()) if net.is_dir() else []:
        # Virtual interfaces (lo, veth, bridges, docker0) have no `device`: not a NIC.
        if iface.name in rdma_netdevs or not (iface / "device").exists() or _read(iface / "type") != _ARPHRD_ETHER:
            continue
        speed = _read(iface / "speed")  # Mb/s; -1 or unreadable when unknown (many VMs, links down)
        mbps = int(speed) if speed and speed.lstrip("-").isdigit() and int(speed) > 0 else None
        ports.append(Port(
            name=iface.name, device=iface.name, kind=ETHERNET, state=_read(iface / "operstate"), phys_state=None,
            rate_bytes_per_s=mbps * 1e6 / 8 if mbps else None, rate_text=f"{speed} Mb/s" if mbps else None,
            device_id=_device_id(iface / "device")))
    return ports


# -- GPU-to-NIC paths from `nvidia-smi topo -m` ---------------------------------------------------


def nic_paths_from_topo_text(text: str, source: str) -> dict[int, dict[str, str]]:
    """{GPU index: {NIC name: path code}} from the GPU rows' NIC columns; {} when there are none.

    NIC columns are NIC<n> (named in the "NIC Legend" block) or, on old drivers, the device itself
    (mlx5_0). Cells hold no spaces, so whitespace splitting reads both TAB and space-separated copies.
    Raises ValueError naming `source` and the line when a GPU row is short."""
    lines = _ANSI.sub("", text).splitlines()
    header_at = next((i for i, line in enumerate(lines) if line.split() and _GPU_LABEL.fullmatch(line.split()[0])
                      and "X" not in line.split()), None)
    if header_at is None:
        raise ValueError(f"{source}: no header with GPU columns; expected the output of `nvidia-smi topo -m`")
    header = lines[header_at].split()
    # Device labels end where the trailer names start ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID").
    devices = header[: next((k for k, t in enumerate(header) if t in ("CPU", "NUMA", "GPU")), len(header))]
    nic_cols = [k for k, d in enumerate(devices) if not _GPU_LABEL.fullmatch(d)]
    legend = {}
    in_legend = False
    for line in lines:
        if line.strip().startswith("NIC Legend"):
            in_legend = True
        elif in_legend and (m := _NIC_LEGEND_ENTRY.match(line)):
            legend[m.group(1)] = m.group(2)
    paths: dict[int, dict[str, str]] = {}
    if not nic_cols:
        return paths
    for number, line in enumerate(lines[header_at + 1:], header_at + 2):
        tokens = line.split()
        if not tokens:
            break
        if not _GPU_LABEL.fullmatch(tokens[0]):
            continue
        cells = tokens[1: 1 + len(devices)]
        if len(cells) < len(devices):
            raise ValueError(f"{source}, line {number}: row {tokens[0]} has {len(cells)} cells for {len(devices)} "
                             "device columns; expected a complete `nvidia-smi topo -m` row")
        row = {}
        for k in nic_cols:
            code = "SYS" if cells[k] == "SOC" else cells[k]  # very old drivers
            if code not in PCIE_LEVELS:
                raise ValueError(f"{source}, line {number}: {tokens[0]}/{devices[k]} is {cells[k]!r}; "
                                 f"expected a PCIe path code ({', '.join(PCIE_LEVELS)})")
            row[legend.get(devices[k], devices[k])] = code
        paths[int(tokens[0][3:])] = row
    return paths


def live_nic_paths() -> tuple[dict[int, dict[str, str]] | None, str]:
    """GPU-to-NIC paths from this node's `nvidia-smi topo -m` (no CUDA context), with where they came
    from, or None and why not."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None, "nvidia-smi is not on PATH: no GPU-to-NIC paths"
    try:
        done = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=TOPO_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"`nvidia-smi topo -m` failed: {exc}"
    if done.returncode != 0:
        return None, f"`nvidia-smi topo -m` exited {done.returncode}: {(done.stderr or done.stdout).strip()[:200]}"
    try:
        return nic_paths_from_topo_text(done.stdout, "nvidia-smi topo -m"), "nvidia-smi topo -m"
    except ValueError as exc:
        return None, str(exc)


def recorded_nic_paths(topology_source: str | None) -> tuple[dict[int, dict[str, str]] | None, str]:
    """The NIC columns of a recorded `topo -m` text (a simulated node), or None and why not."""
    if not topology_source or not str(topology_source).endswith(".txt"):
        return None, f"the recorded topology {topology_source} is not a `nvidia-smi topo -m` text: it has no NIC columns"
    path = Path(topology_source)
    try:
        return nic_paths_from_topo_text(path.read_text(encoding="utf-8", errors="replace"), str(path)), str(path)
    except OSError as exc:
        return None, f"{path}: {exc.strerror or exc}"


def nearest_nic(paths: dict[str, str]) -> tuple[str, str] | None:
    """(NIC, code) of the closest NIC by topo -m path, or None without NICs."""
    if not paths:
        return None
    nic = min(paths, key=lambda n: (PCIE_LEVELS.index(paths[n]), n))
    return nic, paths[nic]


# -- line rate ---------------------------------------------------------------------------------------


def ports_as_data(ports: list[Port]) -> list[dict]:
    return [asdict(p) | {"up": p.up} for p in ports]


def line_rate(ports: list[dict], gpus: int) -> tuple[float | None, str]:
    """The NIC bandwidth (bytes/s, one direction) a job with `gpus` GPUs on this node can use, and how
    it was reached: min(GPUs, active ports) x the slowest active port, RDMA ports when there are any
    (NCCL prefers them), else Ethernet. Each GPU drives its nearest NIC (NCCL's rail pairing), so a
    node with 8 NICs and 1 GPU in the job gets one NIC's rate."""
    rdma = [p for p in ports if p["kind"] in RDMA_KINDS]
    usable = [p for p in (rdma or ports) if p["up"]]
    if not usable:
        return None, "no NIC port is up" if (rdma or ports) else "no NIC found"
    rates = [p["rate_bytes_per_s"] for p in usable]
    if any(r is None for r in rates):
        unknown = ", ".join(p["name"] for p in usable if p["rate_bytes_per_s"] is None)
        return None, f"the kernel gives no rate for {unknown}"
    n = min(gpus, len(usable))
    slowest = min(rates)
    kind = "RDMA" if rdma else "Ethernet"
    return n * slowest, (f"{n} of {len(usable)} active {kind} port(s) x {slowest * 8 / 1e9:g} Gb/s "
                         f"(min of {gpus} GPU(s) and active ports, slowest port)")


def job_line_rate(nodes: dict[str, dict]) -> tuple[float | None, str]:
    """The line rate of a multi-node job: the slowest node's. `nodes`: {name: {"ports": [...], "gpus": n}}."""
    rates = {name: line_rate(n["ports"], n["gpus"]) for name, n in nodes.items()}
    unknown = {name: why for name, (rate, why) in rates.items() if rate is None}
    if unknown:
        return None, "; ".join(f"{name}: {why}" for name, why in sorted(unknown.items()))
    name = min(rates, key=lambda k: rates[k][0])
    return rates[name][0], f"slowest node {name}: {rates[name][1]}"
