"""The node's interconnect as one model, whatever it was read from.

Three sources give the same `Topology`: live NVML (`wirecheck.node.nvml`), the text of
`nvidia-smi topo -m` (`wirecheck.node.topo_text`) and a JSON snapshot written by
`wirecheck topo --save` (`Topology.from_dict`). Everything downstream (placements,
thresholds lookup, tests) reads only this model.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path

# Fabric classes. "bridged" = NVLink only inside small groups (H200 NVL quads, A100 pairs).
NVSWITCH = "nvswitch"
BRIDGED = "bridged"
PCIE = "pcie"
FABRICS = (NVSWITCH, BRIDGED, PCIE)

# PCIe path codes of `nvidia-smi topo -m`, nearest first (NVML topology levels 0/10..50).
PCIE_LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")

# A Hopper GPU has 18 NVLinks; a pair showing NV18 between two GPUs can only be a full
# switch connection or a 2-way bridge. Text alone cannot tell those apart (NVML can).
HOPPER_LINKS_PER_GPU = 18

SNAPSHOT_FORMAT = "wirecheck-topology/1"


@dataclass(frozen=True)
class NvLink:
    """One NVLink of a GPU, as NVML reports it."""

    index: int
    active: bool
    remote_type: str  # "gpu" | "switch" | "unknown"
    remote_bus_id: str | None = None
    version: int | None = None  # NVML enum: 6 = NVLink 4.0 (Hopper)
    speed_mbps: int | None = None  # per direction, NVML field 164


@dataclass(frozen=True)
class Gpu:
    """One GPU. Fields NVML did not answer (or text cannot give) are None."""

    index: int
    name: str | None = None
    bus_id: str | None = None
    uuid: str | None = None
    serial: str | None = None  # the board's serial (nvmlDeviceGetSerial): with the UUID, what names this very GPU
    memory_bytes: int | None = None
    nvlinks: tuple[NvLink, ...] = ()
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    cpu_affinity: str | None = None
    numa_affinity: str | None = None
    # What the derived limits need (wirecheck.node.hardware); None where NVML (or the file) cannot say.
    compute_capability: str | None = None  # "9.0"
    sm_count: int | None = None
    sm_clock_max_mhz: int | None = None
    mem_bus_width: int | None = None  # bits
    mem_clock_max_mhz: int | None = None
    power_limit_w: float | None = None

    @property
    def active_links(self) -> int:
        return sum(1 for link in self.nvlinks if link.active)

    @property
    def switch_links(self) -> int:
        return sum(1 for link in self.nvlinks if link.active and link.remote_type == "switch")


@dataclass(frozen=True)
class Topology:
    """GPUs plus the pairwise NVLink counts and PCIe paths between them.

    `nvlinks[i][j]` is NV# between GPU i and GPU j (0 when there is no NVLink path);
    `pcie_paths[i][j]` is the PCIe code (PIX..SYS) or None when unknown (text shows NV#
    in place of the PCIe code for NVLink pairs).
    """

    gpus: tuple[Gpu, ...]
    nvlinks: tuple[tuple[int, ...], ...]
    pcie_paths: tuple[tuple[str | None, ...], ...]
    source: str = "unknown"
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    nics: tuple[str, ...] = ()
    # Set only when the source knows the fabric for certain (NVML remote device types).
    declared_fabric: str | None = field(default=None)

    def __post_init__(self) -> None:
        n = len(self.gpus)
        if len(self.nvlinks) != n or any(len(row) != n for row in self.nvlinks):
            raise ValueError(f"{self.source}: NVLink matrix is not {n}x{n}")
        for i in range(n):
            for j in range(n):
                if self.nvlinks[i][j] != self.nvlinks[j][i]:
                    raise ValueError(
                        f"{self.source}: NVLink matrix is not symmetric at GPU{i}/GPU{j} "
                        f"({self.nvlinks[i][j]} vs {self.nvlinks[j][i]})"
                    )
        if self.declared_fabric is not None and self.declared_fabric not in FABRICS:
            raise ValueError(f"{self.source}: unknown fabric {self.declared_fabric!r}; expected one of {FABRICS}")

    # -- derived facts -------------------------------------------------------------
    @property
    def n_gpus(self) -> int:
        return len(self.gpus)

    @property
    def indices(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.gpus)

    def nv(self, i: int, j: int) -> int:
        """NV# between GPUs at positions i and j."""
        return self.nvlinks[i][j]

    # GPU indices (NVML's numbering, what placements and test ids use) and positions in
    # `gpus` differ when NVML skips a GPU or a recorded file starts elsewhere: look up by index.
    def position(self, index: int) -> int:
        for pos, g in enumerate(self.gpus):
            if g.index == index:
                return pos
        raise KeyError(f"{self.source}: no GPU with index {index} (indices: {list(self.indices)})")

    def gpu(self, index: int) -> Gpu:
        return self.gpus[self.position(index)]

    def nvlinks_up(self, index: int) -> int:
        """NVLinks up on the GPU with this index: NVML's reading of its links where the source has one; a `topo -m`
        text has only the NV# matrix, read the way it counts: through NVSwitch the NV# to any peer is the GPU's
        switch links, in bridged groups each peer's NV# is links of its own (an H200 NVL in a quad: 3 x NV6 = 18)."""
        gpu = self.gpu(index)
        if gpu.nvlinks:
            return gpu.active_links
        row = self.nvlinks[self.position(index)]
        return max(row, default=0) if self.fabric == NVSWITCH else sum(row)

    def nv_between(self, a: int, b: int) -> int:
        """NV# between the GPUs with indices a and b."""
        return self.nvlinks[self.position(a)][self.position(b)]

    def only(self, indices: tuple[int, ...], why: str) -> "Topology":
        """The same node seen through a subset of its GPUs (indices, NVML's numbering): the matrix and
        paths keep the pairs among them; NV# counts stay what the whole node gave (a switch link is a
        switch link whoever else is visible). `why` is added to the source, e.g. the environment."""
        keep = sorted(self.position(i) for i in indices)
        return replace(
            self,
            gpus=tuple(self.gpus[p] for p in keep),
            nvlinks=tuple(tuple(self.nvlinks[a][b] for b in keep) for a in keep),
            pcie_paths=tuple(tuple(self.pcie_paths[a][b] for b in keep) for a in keep) if self.pcie_paths else (),
            source=f"{self.source} ({why})",
        )

    @property
    def index_groups(self) -> tuple[tuple[int, ...], ...]:
        """`groups`, as GPU indices."""
        return tuple(tuple(self.gpus[p].index for p in group) for group in self.groups)

    @property
    def fabric(self) -> str:
        if self.declared_fabric:
            return self.declared_fabric
        return classify_fabric(self.nvlinks)

    @property
    def groups(self) -> tuple[tuple[int, ...], ...]:
        """NVLink groups: connected components of the NV# graph (singletons when no NVLink)."""
        return nvlink_groups(self.nvlinks)

    def cell(self, i: int, j: int) -> str:
        """The `topo -m` style cell for a pair: X, NV#, a PCIe code or '?'."""
        if i == j:
            return "X"
        if self.nvlinks[i][j]:
            return f"NV{self.nvlinks[i][j]}"
        return self.pcie_paths[i][j] or "?"

    def matrix(self) -> list[list[str]]:
        return [[self.cell(i, j) for j in range(self.n_gpus)] for i in range(self.n_gpus)]

    def group_of(self, gpu: int) -> tuple[int, ...]:
        for group in self.groups:
            if gpu in group:
                return group
        raise KeyError(gpu)

    # -- snapshot (JSON) -----------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "format": SNAPSHOT_FORMAT,
            "source": self.source,
            "driver_version": self.driver_version,
            "cuda_driver_version": self.cuda_driver_version,
            "fabric": self.fabric,
            "declared_fabric": self.declared_fabric,
            "gpus": [asdict(g) for g in self.gpus],
            "nvlinks": [list(r) for r in self.nvlinks],
            "pcie_paths": [list(r) for r in self.pcie_paths],
            "nics": list(self.nics),
        }

    @classmethod
    def from_dict(cls, data: dict, source: str = "snapshot") -> "Topology":
        where = f"{source}"
        if not isinstance(data, dict) or data.get("format") != SNAPSHOT_FORMAT:
            raise ValueError(
                f"{where}: not a wirecheck topology snapshot (expected \"format\": \"{SNAPSHOT_FORMAT}\"); "
                "write one on the node with `wirecheck topo --save FILE`"
            )
        fix = "; re-save it with `wirecheck topo --save`"
        listed = data.get("gpus")
        if not isinstance(listed, (list, tuple)) or not listed:
            raise ValueError(f"{where}: \"gpus\" is {'empty' if isinstance(listed, (list, tuple)) else 'no list'}: a snapshot "
                             f"lists the node's GPUs{fix}")
        gpus = tuple(_from_object(Gpu, g, f"{where}: gpus[{i}]", fix) for i, g in enumerate(listed))
        if len({g.index for g in gpus}) != len(gpus) or any(g.index < 0 for g in gpus):
            raise ValueError(f"{where}: the GPUs' indices {[g.index for g in gpus]} are not distinct and >= 0{fix}")
        nvlinks = _square(data, "nvlinks", len(gpus), (int,), "a whole number", where, fix)
        pcie_paths = _square(data, "pcie_paths", len(gpus), (str, type(None)), "text or null", where, fix)
        for key in ("fabric", "declared_fabric", "driver_version", "cuda_driver_version", "source"):
            if not isinstance(data.get(key), (str, type(None))):
                raise ValueError(f"{where}: \"{key}\": {data[key]!r} is not text{fix}")
        nics = data.get("nics", [])
        if not isinstance(nics, (list, tuple)) or not all(isinstance(n, str) for n in nics):
            raise ValueError(f"{where}: \"nics\": {nics!r} is not a list of NIC names{fix}")
        # The model's own checks (a symmetric NV# matrix, a known fabric) name the file too.
        return cls(
            gpus=gpus,
            nvlinks=nvlinks,
            pcie_paths=pcie_paths,
            source=source,
            driver_version=data.get("driver_version"),
            cuda_driver_version=data.get("cuda_driver_version"),
            nics=tuple(nics),
            declared_fabric=data.get("declared_fabric"),
        )

    def save(self, path: str | Path) -> None:
        """Replaced whole, never written through a link planted at the name (safefs.write_atomically)."""
        from wirecheck.core.safefs import umask, write_atomically

        write_atomically(path, json.dumps(self.to_dict(), indent=1) + "\n", mode=0o666 & ~umask())


# A snapshot's field types, by the dataclass's own annotations (strings, under `from __future__ import annotations`).
_JSON_TYPES = {"int": ((int,), "a whole number"), "float": ((int, float), "a number"), "str": ((str,), "text"),
               "bool": ((bool,), "true or false")}


def _from_object(cls, obj, where: str, fix: str):
    """A Gpu or NvLink from its snapshot object, each field's type checked against the dataclass, so that a
    damaged file is named with its key, never met later as a TypeError in the placements."""
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: {_shown(obj)} is not an object{fix}")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(obj) - set(known))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}{fix}")
    values = {}
    for name, f in known.items():
        if name not in obj:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ValueError(f"{where}: no \"{name}\"{fix}")
            continue
        value = obj[name]
        if name == "nvlinks":  # Gpu's links
            if not isinstance(value, (list, tuple)):
                raise ValueError(f"{where}.nvlinks: {_shown(value)} is not a list{fix}")
            values[name] = tuple(_from_object(NvLink, link, f"{where}.nvlinks[{j}]", fix) for j, link in enumerate(value))
            continue
        kinds = [part.strip() for part in str(f.type).split("|")]
        types, said = _JSON_TYPES[kinds[0]]
        is_bool = isinstance(value, bool) and bool not in types  # JSON's true is no number here
        if not ((value is None and "None" in kinds) or (isinstance(value, types) and not is_bool)):
            raise ValueError(f"{where}.{name}: {_shown(value)} is not {said}{fix}")
        values[name] = value
    return cls(**values)


def _shown(value, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def _square(data: dict, key: str, n: int, types: tuple, said: str, where: str, fix: str) -> tuple:
    """A GPU-by-GPU matrix of the snapshot (its NV# counts, its PCIe path codes), each cell of `types`."""
    rows = data.get(key)
    if not isinstance(rows, (list, tuple)) or len(rows) != n or any(
            not isinstance(r, (list, tuple)) or len(r) != n for r in rows):
        raise ValueError(f"{where}: \"{key}\" is not {n}x{n}, one row and column per GPU{fix}")
    for i, row in enumerate(rows):
        for j, cell in enumerate(row):
            if not isinstance(cell, types) or (isinstance(cell, bool) and bool not in types):
                raise ValueError(f"{where}: \"{key}\"[{i}][{j}]: {_shown(cell)} is not {said}{fix}")
    return tuple(tuple(row) for row in rows)


def nvlink_groups(nvlinks: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, ...], ...]:
    """Connected components of the graph whose edges are pairs with NV# > 0.

    Bridged groups are not always adjacent indices (e.g. {0,3},{1,2}): never assume.
    """
    n = len(nvlinks)
    seen: set[int] = set()
    groups = []
    for start in range(n):
        if start in seen:
            continue
        stack, comp = [start], set()
        while stack:
            i = stack.pop()
            if i in comp:
                continue
            comp.add(i)
            stack.extend(j for j in range(n) if j != i and nvlinks[i][j] > 0 and j not in comp)
        seen |= comp
        groups.append(tuple(sorted(comp)))
    return tuple(sorted(groups))


def classify_fabric(nvlinks: tuple[tuple[int, ...], ...]) -> str:
    """Fabric class from the NV# matrix alone (used when the source has no NVML link types).

    - no NVLink anywhere: pcie;
    - every pair connected with more links than a GPU could give each peer directly
      (sum over peers > 18 per GPU, e.g. NV18 to 7 peers): nvswitch;
    - a 2-GPU NV18 pair: nvswitch (an SXM partition; a 2-way NVL bridge reads the same
      in text, NVML tells them apart: record a JSON snapshot for those);
    - anything else with NVLink: bridged groups.
    """
    n = len(nvlinks)
    pairs = [nvlinks[i][j] for i in range(n) for j in range(i + 1, n)]
    if not any(pairs):
        return PCIE
    complete = all(pairs)
    if complete:
        per_gpu = [sum(nvlinks[i][j] for j in range(n) if j != i) for i in range(n)]
        if min(per_gpu) > HOPPER_LINKS_PER_GPU:
            return NVSWITCH
        if n == 2 and pairs[0] >= HOPPER_LINKS_PER_GPU:
            return NVSWITCH
    return BRIDGED


def nvlink_matrix_from_links(gpus: tuple[Gpu, ...]) -> tuple[tuple[int, ...], ...]:
    """NV#(i,j) = direct links i->j (remote bus id = j's) + min(switch links of i, of j).

    This is the rule NCCL, DCGM and PyTorch share: every NVSwitch is assumed to reach
    every GPU, so a pair through switches is limited by the GPU with fewer switch links.
    """
    bus_to_pos = {_norm_bus(g.bus_id): pos for pos, g in enumerate(gpus) if g.bus_id}
    n = len(gpus)
    direct = [[0] * n for _ in range(n)]
    for i, gpu in enumerate(gpus):
        for link in gpu.nvlinks:
            if link.active and link.remote_type == "gpu":
                j = bus_to_pos.get(_norm_bus(link.remote_bus_id))
                if j is not None and j != i:
                    direct[i][j] += 1
    switch = [g.switch_links for g in gpus]
    rows = []
    for i in range(n):
        row = []
        for j in range(n):
            if i == j:
                row.append(0)
            else:
                # Direct counts are read from both ends: take the smaller (a link down on one side).
                row.append(min(direct[i][j], direct[j][i]) + min(switch[i], switch[j]))
        rows.append(tuple(row))
    return tuple(rows)


def _norm_bus(bus_id: str | None) -> str:
    """Bus ids differ in domain width across drivers (00000000:07:00.0 vs 0000:07:00.0)."""
    if not bus_id:
        return ""
    bus_id = bus_id.strip().upper()
    domain, _, rest = bus_id.partition(":")
    return f"{int(domain, 16):08X}:{rest}" if rest and all(c in "0123456789ABCDEF" for c in domain) else bus_id
