"""What the node is: its GPUs and links from NVML or a recorded `nvidia-smi topo -m`
(`topology`, `topo_text`, `nvml`, `driver`), which of them this run may use (`visible`:
CUDA_VISIBLE_DEVICES), the GPU subsets to test (`placement`), its network (`network`) and the
link error counters read over a run (`health`).

May import: core. Reads NVML and /sys only; never CUDA, never torch.
"""
