"""What the node is: its GPUs and links from NVML or a recorded `nvidia-smi topo -m`
(`topology`, `topo_text`, `nvml`, `driver`) or the one a node profile describes for a dry run
(`profile_topology`), the hardware a limit is made for and its peaks (`hardware`), which of them this
run may use (`visible`:
CUDA_VISIBLE_DEVICES), the GPU subsets to test (`placement`) and the peak of the wire each rides (`wire`), its network (`network`), the
link error counters read over a run (`health`), and NVML beside a GPU load (`gpu_sampling`), the
XID events of a run (`xid_events`) and memory-error counters as plain data (`memory_errors`).

May import: core, vocab (the placement classes). Reads NVML and /sys only; never CUDA, never torch.
"""
