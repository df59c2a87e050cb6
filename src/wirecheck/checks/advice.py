"""What a failed check means and what to do about it, by check name: two lines of the failure
block (wirecheck.checks.failure_block) that a failing test prints.

ADVICE is the one table: the entries below, and those a check declares with
`@check("name", advice=Advice(...))` (the GPU health checks, a site's check), added when it
registers; a check may not have both. A check without one gets GENERIC,
which points at the message and the README: the block still shows measured, limit and source.
"""

from __future__ import annotations

from typing import NamedTuple


class Advice(NamedTuple):
    means: str  # what a failure says about the node
    todo: str  # the first thing to do


GENERIC = Advice("the measured value is outside the limit the thresholds file sets for it",
                 "read the message above; the README's \"What the suite checks\" says what this check covers")

_BANDWIDTH_TODO = ("compare `wirecheck topo` with the expected wiring (a link down halves a pair), check "
                   "`nvidia-smi nvlink -s` and `nvidia-smi -q -d CLOCK,PERFORMANCE`, then run `pytest -k "
                   "<placement> -v` again for the size sweep")

ADVICE: dict[str, Advice] = {
    # collectives
    "collective_correct": Advice(
        "a collective returned wrong data: silent corruption on a GPU, a link or in NCCL",
        "drain the node; run `pytest -k <placement> -v` again to see which size and rank; check `nvidia-smi -q -d ECC` "
        "and dmesg for XIDs"),
    "busbw": Advice("the GPUs of this placement move data slower than their fabric allows", _BANDWIDTH_TODO),
    "wire_check": Advice(
        "NVLink is not much faster than the host path on the same GPUs: NCCL is not using NVLink, or a link is down",
        "check `nvidia-smi nvlink -s` and `nvidia-smi topo -m`; look for NCCL_P2P_DISABLE or NCCL_P2P_LEVEL in the "
        "environment; `pytest -k nccl_path` shows the path NCCL took"),
    "pair_spread": Advice(
        "one GPU pair is much slower than the median pair: a link or a GPU is degraded",
        "`nvidia-smi nvlink -s -i <gpu>` on the pair's GPUs (links down, lower speed); reseat or replace the GPU or "
        "the bridge"),
    "group_scaling": Advice(
        "a whole NVLink group is slower than a pair inside it allows: a link of the group is down or slow",
        "`nvidia-smi nvlink -s` on every GPU of the group; `pytest -k pair -v` names the slow pair"),
    "small_message_latency": Advice(
        "small collectives take too long: launch or synchronisation overhead (CPU contention, NCCL settings)",
        "check for other processes on the host (`top`), NCCL_* variables in the environment and CPU frequency "
        "scaling; run the placement again with -v"),
    "half_peak_size": Advice(
        "bandwidth ramps up late: medium messages are slow even if the peak is fine",
        "check NCCL_ALGO/NCCL_PROTO/NCCL_*CHANNELS in the environment and CPU contention; run with -v for the sweep"),
    "nccl_path": Advice(
        "NCCL connected these GPUs over another path than their wiring (no P2P over NVLink, or P2P where it was "
        "disabled)",
        "read the NCCL line quoted above; check NCCL_P2P_* and NCCL_SHM_* in the environment, peer access "
        "(`nvidia-smi topo -p2p r`) and the container's IPC settings"),
    "diagnosis": Advice(
        "the follow-up probes of a failure named the part behind it (found), or the failure came back and no probe "
        "singled out a part (not localized)",
        "act on the part named (the GPU, the pair's link, the NVLink, the slot) with its evidence above; not "
        "localized: keep the node drained and run `wirecheck diagnose RUN.jsonl --run` again, then NVIDIA's field "
        "diagnostics"),
    "measurement_completed": Advice(
        "the measurement itself broke (a rank hung, raised or died): nothing could be judged",
        "read the ranks' stacks and logs named above; a hang on one wire only points at its link or GPU"),
    # copies
    "host_copy": Advice(
        "copies between host and GPU are slow: the GPU's PCIe link runs below its generation or width, or the "
        "CPU/NUMA placement is wrong",
        "`nvidia-smi -q -d PCIE` under load (Gen and width), `lspci -vv` for the slot; reseat the GPU or its riser"),
    "pcie_link_under_load": Advice(
        "the PCIe link trained down (lower generation or width) while data moved",
        "reseat the GPU (or riser/retimer), check the BIOS PCIe settings and `dmesg` for AER errors"),
    "peer_copy": Advice(
        "direct GPU-to-GPU copies are slow: a link of the pair is down or peer access is off",
        "`nvidia-smi nvlink -s` on both GPUs and `nvidia-smi topo -p2p r`"),
    # topology
    "nvlink_groups": Advice(
        "the NVLink groups are not the full meshes this fabric is built as: a link or a bridge is missing",
        "`nvidia-smi topo -m` against the node's wiring; reseat the NVLink bridge or check the fabric manager"),
    "nvlinks_per_gpu": Advice(
        "a GPU has fewer NVLinks up than the fabric expects",
        "`nvidia-smi nvlink -s -i <gpu>` names the link that is down; reseat or replace the GPU/bridge, or reset the GPU"),
    "nvlink_speed": Advice(
        "NVLinks run at different speeds: one trained down",
        "`nvidia-smi nvlink -s`; a GPU reset retrains the link, a repeat means hardware"),
    "peer_access": Advice(
        "two GPUs cannot read/write each other directly",
        "`nvidia-smi topo -p2p r`; check IOMMU/ACS settings in the BIOS and the container's device access"),
    # inventory
    "gpus_visible": Advice(
        "no GPU could be read on this machine: nothing was validated",
        "make `nvidia-smi` list the GPUs (driver, kernel module, container GPU access); for a dry run, --simulate"),
    "gpu_count": Advice(
        "the node has another number of GPUs than its profile: a GPU fell off the bus or is hidden",
        "`nvidia-smi -L`, `dmesg | grep -i xid` (79: fallen off the bus); check CUDA_VISIBLE_DEVICES and MIG"),
    "gpu_model": Advice("a GPU is another model than the profile expects",
                        "check --profile, or the node's build sheet"),
    "fabric": Advice("the GPUs are wired differently from what the profile expects",
                     "`wirecheck topo`; check --profile and the fabric manager"),
    "pcie_width": Advice("a GPU's PCIe link is narrower than its maximum",
                         "reseat the GPU or its riser; `lspci -vv` shows LnkSta against LnkCap"),
    "pcie_generation": Advice("a GPU's PCIe link cannot reach the profile's generation",
                              "check the BIOS PCIe generation setting and the riser; reseat the GPU"),
    "ecc_uncorrected": Advice("a GPU reports uncorrectable memory errors",
                              "drain the node; `nvidia-smi -q -d ECC,ROW_REMAPPER`; reset the GPU, replace it if "
                              "errors come back"),
    "row_remapping": Advice("a GPU has a pending or failed memory row remap",
                            "a pending remap needs a GPU reset (`nvidia-smi -r`); a failed one means replacing the GPU"),
    "persistence_mode": Advice("persistence mode is off: every job pays the driver's start-up and clocks may reset",
                               "`nvidia-smi -pm 1` (or enable nvidia-persistenced)"),
    "fabric_manager": Advice("the NVSwitch fabric is not up: GPUs cannot use NVLink across the switches",
                             "`systemctl status nvidia-fabricmanager` and its log; restart it, then reset the GPUs"),
    "no_foreign_processes": Advice(
        "another process uses the GPU: every figure measured beside it is wrong",
        "stop that process (the pid is named above; `nvidia-smi` lists it) or drain the node from the scheduler, "
        "then run again"),
    # link health
    "counter_growth": Advice(
        "NVLink or PCIe error counters grew during the run: a link is flaky even if bandwidth looked fine",
        "`nvidia-smi nvlink -e` / `nvidia-smi -q -d PCIE` on that GPU; reseat, then replace what keeps counting"),
    # network
    "nic_ports_up": Advice("an InfiniBand/RoCE port is down: multi-node jobs lose its bandwidth",
                           "`ibstat`; check the cable and the switch port"),
    "nic_rate": Advice("a NIC port runs below the expected rate", "`ibstat` (rate and width); reseat or replace the cable"),
    "nic_count": Advice("the node has another number of NIC ports than its profile", "`ibstat`; check the build sheet"),
    "gpu_nic_affinity": Advice("a GPU's nearest NIC is far (across a CPU socket): its network traffic crosses the "
                               "host", "`nvidia-smi topo -m`; check the NIC slots against the node's design"),
    # training
    "steps_complete": Advice("a training strategy produced non-finite losses or missing steps",
                             "run `pytest -k '<strategy> and <placement>' -v`; a wrong collective (see "
                             "collective_correct) is the usual cause"),
    "losses_agree": Advice("a strategy's losses differ from DDP's on the same data: its gradients are wrong",
                           "check collective_correct on the same placement; then the library versions in the header"),
    "model_state": Advice("a strategy holds more (or less) model state per GPU than the memory model predicts",
                          "check the library versions in the header and `wirecheck memory`; the strategy may not shard "
                          "as configured"),
    "staircase": Advice("the strategies' model state per GPU is not in the order DDP >= ZeRO-1 >= ZeRO-2 >= ZeRO-3",
                        "as model_state: a strategy does not shard as configured"),
    "peak_memory": Advice("a strategy used more GPU memory than its limit", "check another process's memory "
                          "(`nvidia-smi`) and the library versions; compare with the record's memory figures"),
    "throughput": Advice("training runs slower than the floor for this wiring and strategy",
                         "check the placement's collectives (busbw) and the host (the -v dial's `py loop`); a slow "
                         "host, not the wire, shows there"),
    "slow_wire": Advice("a strategy does not slow down on the host path as it should: the NVLink run was slow, or "
                        "the host path is not the host path", "check busbw and nccl_path on both placements"),
    "dial_flattens": Advice("one strategy collapses on the host path far beyond the others",
                            "compare the dial tables (-v) of both placements; check that strategy's library version"),
    "single_gpu_training": Advice(
        "one GPU alone trains the strategies' model slower than its floor, or its losses are not finite: the GPU or "
        "its host, not the wire (no other GPU takes part)",
        "compare with the GPU health checks (GEMM, sustained load) of the same GPU and the -v dial's `py loop` (a "
        "slow host); non-finite losses: run the GPU's math check (`pytest -k gemm_matches_reference`)"),
    "capacity": Advice("a model that must not fit under DDP did, or FSDP could not train it",
                       "check GPU memory (`nvidia-smi`) and the library versions"),
    # fleet
    "node_record": Advice("a node's record is missing, cut short or interrupted: the node was not validated",
                          "look at the node's job log; run `wirecheck validate` on it again"),
    "network_record": Advice("the multi-node step wrote no record: the fleet's network was not validated",
                             "look at the multi-node job's log (rendezvous, a node without a GPU)"),
    "fleet_outlier": Advice("a node is clearly slower than its peers, even if it clears its own floors",
                            "run `wirecheck validate -k <placement> -v` on that node and compare its link and clocks "
                            "with a peer's"),
    "fleet_gpu_outlier": Advice(
        "a GPU is clearly slower than the fleet's GPUs of its model, even if it clears its own floor and its node's "
        "peers (every GPU of its node may be slow alike: power, cooling or firmware of that node)",
        "compare `nvidia-smi -q -d CLOCK,PERFORMANCE,POWER` on that node with a peer node's (clocks, power limit, "
        "firmware); run `wirecheck validate -m health -v` on it"),
    "pair_node": Advice("a node is slow with every partner: the node (its NICs, PCIe or GPUs) is the problem",
                        "`wirecheck fleet inventory` and `ibstat` on that node"),
    "pair_link": Advice("one node pair is slow while both nodes are fine with others: the link or switch path "
                        "between them", "check the cables and switch ports between the two nodes"),
}


# A figure can fail for what ran beside it rather than for the GPU: the verdict's details say so, and
# the advice is then the cause's (a GEMM of another process on the GPU halves its HBM figure).
CAUSES = {"foreign_processes": "no_foreign_processes"}


def advice_for(check: str | None, details: dict | None = None) -> Advice:
    for key, cause in CAUSES.items():
        if (details or {}).get(key):
            return ADVICE[cause]
    return ADVICE.get(check or "", GENERIC)
