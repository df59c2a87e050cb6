"""A stable failure code per check and kind, as DCGM's error ids and NVIDIA's XID catalog are: the code a
verdict carries, the record keeps, Prometheus labels, the health events send and the catalog
(docs/failure-codes.md) explains.

The codes come from this declared table, never from a hash or the order of registration: each check has a
number of three digits; its code is `WC` + that number + the kind's digit (1: fail, 2: warn), so busbw's
failure is WC2021 and its warning WC2022. A pass or a skip has no code. The hundreds group the checks
(1 inventory, topology and NICs; 2 collectives; 3 copies; 4 each GPU under load; 5 training; 6 link
health and history; 7 burn-in and fleet; 8 the measurement itself and diagnosis; 9 NVIDIA's own tools).

A code never changes its meaning: a check keeps its number for good, a retired check's number stays in
RETIRED and is never given again, a renamed check keeps its number (the new name takes the old one's
row). selftests/data/failure_codes.txt is the ledger of every code ever issued; the self-test
(test_failure_codes.py) fails when a code in it is reused, renamed or gone.

Each check also names its component class, what a health event (wirecheck.records.events) says is
affected: GPU, NVLINK, PCIE, MEMORY, NIC, NODE, or FABRIC for a check of a placement's wire, which is the
component of the placement's own wire (NVLINK on NVLink placements, PCIE on the host path, NIC across
nodes, GPU for one GPU alone: the caller says, from wirecheck.vocab.placements). A check not in the table
(a site's own) has no code and the component NODE.
"""

from __future__ import annotations

from typing import NamedTuple

PREFIX = "WC"
KINDS = {"fail": 1, "warn": 2}  # the verdict outcome -> the code's last digit

GPU, NVLINK, PCIE, MEMORY, NIC, NODE = "GPU", "NVLINK", "PCIE", "MEMORY", "NIC", "NODE"
COMPONENTS = (GPU, NVLINK, PCIE, MEMORY, NIC, NODE)
FABRIC = "FABRIC"  # resolved per placement: the component of its wire (component_of)


class Entry(NamedTuple):
    number: int  # three digits, never reused
    component: str  # COMPONENTS or FABRIC


TABLE: dict[str, Entry] = {
    # 1xx: inventory, topology, NICs (read before anything runs)
    "gpus_visible": Entry(101, GPU),
    "gpu_count": Entry(102, GPU),
    "gpu_model": Entry(103, GPU),
    "fabric": Entry(104, NVLINK),
    "pcie_width": Entry(105, PCIE),
    "pcie_generation": Entry(106, PCIE),
    "ecc_uncorrected": Entry(107, MEMORY),
    "row_remapping": Entry(108, MEMORY),
    "persistence_mode": Entry(109, GPU),
    "fabric_manager": Entry(110, NVLINK),
    "no_foreign_processes": Entry(111, NODE),
    "ras_readiness": Entry(112, NODE),
    "nvlink_groups": Entry(121, NVLINK),
    "nvlinks_per_gpu": Entry(122, NVLINK),
    "nvlink_speed": Entry(123, NVLINK),
    "peer_access": Entry(124, NVLINK),
    "nic_ports_up": Entry(131, NIC),
    "nic_rate": Entry(132, NIC),
    "nic_count": Entry(133, NIC),
    "gpu_nic_affinity": Entry(134, NIC),
    # 2xx: collectives
    "collective_correct": Entry(201, FABRIC),
    "busbw": Entry(202, FABRIC),
    "wire_check": Entry(203, FABRIC),
    "pair_spread": Entry(204, FABRIC),
    "group_scaling": Entry(205, FABRIC),
    "small_message_latency": Entry(206, FABRIC),
    "half_peak_size": Entry(207, FABRIC),
    "nccl_path": Entry(208, FABRIC),
    # 3xx: copies without NCCL
    "host_copy": Entry(301, PCIE),
    "pcie_link_under_load": Entry(302, PCIE),
    "peer_copy": Entry(303, NVLINK),
    # 4xx: each GPU under load
    "hbm_bandwidth": Entry(401, MEMORY),
    "gemm_throughput": Entry(402, GPU),
    "sustained_throughput": Entry(403, GPU),
    "gemm_matches_reference": Entry(404, GPU),
    "sustained_clocks": Entry(405, GPU),
    "sustained_power": Entry(406, GPU),
    "sustained_temperature": Entry(407, GPU),
    "memory_pattern": Entry(408, MEMORY),
    "no_xid": Entry(409, GPU),
    "ecc_row_remap_growth": Entry(410, MEMORY),
    # 5xx: training
    "steps_complete": Entry(501, NODE),
    "losses_agree": Entry(502, NODE),
    "model_state": Entry(503, NODE),
    "staircase": Entry(504, NODE),
    "peak_memory": Entry(505, NODE),
    "throughput": Entry(506, NODE),
    "single_gpu_training": Entry(507, GPU),
    "slow_wire": Entry(508, FABRIC),
    "dial_flattens": Entry(509, FABRIC),
    "capacity": Entry(510, NODE),
    # 6xx: link health over the run, each GPU against its own history
    "counter_growth": Entry(601, NVLINK),
    "history": Entry(602, GPU),
    "drift": Entry(603, GPU),
    # 7xx: burn-in, fleet
    "burn_in_no_hard_fault": Entry(701, NODE),
    "burn_in_throughput_drift": Entry(702, GPU),
    "burn_in_busbw_spread": Entry(703, FABRIC),
    "node_record": Entry(751, NODE),
    "network_record": Entry(752, NIC),
    "fleet_outlier": Entry(753, NODE),
    "fleet_gpu_outlier": Entry(754, GPU),
    "pair_node": Entry(755, NODE),
    "pair_link": Entry(756, NIC),
    # 8xx: the measurement itself, the diagnosis of a failure
    "measurement_completed": Entry(801, NODE),
    "diagnosis": Entry(802, NODE),
    # 9xx: NVIDIA's own tools judged in the record
    "dcgm_diag": Entry(901, GPU),
}

# Numbers of checks that are gone: never given again (number -> the check it was).
RETIRED: dict[int, str] = {}
# A check renamed keeps its number: old name -> new name (the ledger keeps the old name's lines).
RENAMED: dict[str, str] = {}


def _refuse_duplicates() -> None:
    seen: dict[int, str] = {}
    for check, entry in TABLE.items():
        if not 100 <= entry.number <= 999:
            raise ValueError(f"failure code table: {check}'s number {entry.number} is not three digits")
        if entry.number in seen or entry.number in RETIRED:
            other = seen.get(entry.number) or f"retired {RETIRED[entry.number]}"
            raise ValueError(f"failure code table: {check} and {other} share the number {entry.number}")
        if entry.component not in COMPONENTS + (FABRIC,):
            raise ValueError(f"failure code table: {check}'s component {entry.component!r}; known {COMPONENTS}, {FABRIC}")
        seen[entry.number] = check


_refuse_duplicates()


def code(check: str | None, outcome: str) -> str | None:
    """The failure code of a verdict of `check` with `outcome`; None for a pass, a skip or a check the
    table does not know."""
    entry = TABLE.get(RENAMED.get(check or "", check or ""))
    kind = KINDS.get(outcome)
    if entry is None or kind is None:
        return None
    return f"{PREFIX}{entry.number:03d}{kind}"


def parse(text: str) -> tuple[str, str] | None:
    """(check, kind) of a code such as WC2021; None for a code this table never gave."""
    text = text.strip().upper()
    if not (text.startswith(PREFIX) and len(text) == len(PREFIX) + 4 and text[len(PREFIX):].isdigit()):
        return None
    number, digit = int(text[len(PREFIX):-1]), int(text[-1])
    kind = next((k for k, d in KINDS.items() if d == digit), None)
    check = next((c for c, e in TABLE.items() if e.number == number), None)
    return (check, kind) if check and kind else None


def component_of(check: str | None, wire: str | None = None) -> str:
    """The component class a verdict of `check` is about; a FABRIC check's is `wire`, the component its
    placement's wire is (NVLINK when not known)."""
    entry = TABLE.get(RENAMED.get(check or "", check or ""))
    if entry is None:
        return NODE
    if entry.component != FABRIC:
        return entry.component
    return wire if wire in COMPONENTS else NVLINK


def issued() -> list[tuple[str, str, str]]:
    """Every code the table gives, (code, check, kind), in code order: the ledger's lines."""
    out = [(code(check, kind), check, kind) for check in TABLE for kind in KINDS]
    return sorted(out)


def ledger_problems(ledger: list[str]) -> list[str]:
    """Where the table breaks the ledger of codes ever issued (lines `CODE CHECK KIND`): a code gone, given to
    another check or kind (reused or renamed), or a code the table gives that the ledger does not hold yet."""
    problems, listed = [], set()
    for line in ledger:
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 3:
            problems.append(f"ledger line {line!r}: give `CODE CHECK KIND`")
            continue
        given, check, kind = parts
        listed.add(given)
        number = int(given[len(PREFIX):-1]) if given[len(PREFIX):].isdigit() else None
        if number in RETIRED:
            if RETIRED[number] != check:
                problems.append(f"{given}: retired as {RETIRED[number]}'s, the ledger says {check}'s")
            continue
        now = code(check, kind)
        if now != given:
            holder = parse(given)
            problems.append(f"{given} was {check} {kind}; the table now gives it to "
                            f"{' '.join(holder) if holder else 'no check'} and {check} {kind} "
                            f"{'the code ' + now if now else 'no code'}: a code never changes its meaning (keep the "
                            "number; a renamed check goes into RENAMED, a removed one into RETIRED)")
    for given, check, kind in issued():
        if given not in listed:
            problems.append(f"{given} ({check} {kind}) is not in the ledger: append `{given} {check} {kind}`")
    return problems
