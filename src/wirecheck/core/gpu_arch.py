"""What a GPU's architecture gives per clock: the vocabulary behind the derived limits.

A GPU's dense math peak is SMs x max SM clock x flop per SM per clock for its compute capability
and dtype; its memory peak is bus width / 8 x max memory clock x 2 (NVML reports the memory clock
at half the data rate for HBM and GDDR alike); its NVLink peak is links x per-link speed. NVML gives
SMs (through CUDA cores / cores per SM), the clocks, the bus width and the compute capability; the
per-clock figures below are the architecture's, each checked against NVIDIA's published dense peak.
"""

from __future__ import annotations

# Dense (no sparsity) tensor-core flop per SM per clock, by compute capability and dtype. Each row is
# NVIDIA's published dense peak divided by SMs x boost clock:
FLOP_PER_SM_PER_CLOCK: dict[tuple[str, str], int] = {
    # A100 SXM: 312 TFLOP/s bf16 = 108 SMs x 1410 MHz x 2048 (A100 datasheet); no fp8 tensor cores.
    ("8.0", "bf16"): 2048,
    # A40 / A10 (GA102): 149.7 TFLOP/s bf16 = 84 SMs x 1740 MHz x 1024 (A40 datasheet).
    ("8.6", "bf16"): 1024,
    # L40S (AD102): 362 TFLOP/s bf16 dense (733 with sparsity) at 142 SMs x 2520 MHz ~ 1024 (366 TFLOP/s);
    # fp8 733 dense ~ 2048 (L40S datasheet).
    ("8.9", "bf16"): 1024,
    ("8.9", "fp8"): 2048,
    # H100 / H200 SXM: 989.4 TFLOP/s bf16 dense = 132 SMs x 1830 MHz x 4096; fp8 1979 = x 8192
    # (H100 whitepaper, H200 datasheet).
    ("9.0", "bf16"): 4096,
    ("9.0", "fp8"): 8192,
    # B200: ~2250 TFLOP/s bf16 dense, 4500 fp8, at 148 SMs x ~1850 MHz ~ 8192 / 16384 (B200 datasheet;
    # the clock is not published: guess until NVML's max SM clock is read on a B200).
    ("10.0", "bf16"): 8192,
    ("10.0", "fp8"): 16384,
}
FLOP_SOURCES = "NVIDIA datasheets' dense peaks / (SMs x boost clock): A100, A40, L40S, H100/H200, B200 (guess)"

# FP32 CUDA cores per SM: nvmlDeviceGetNumGpuCores / this = SMs (NVML has no SM count for a whole GPU).
# A100 6912 cores / 108 SMs = 64; Ampere GA10x, Ada, Hopper, Blackwell: 128 (H100 SXM 16896 / 132).
CUDA_CORES_PER_SM: dict[str, int] = {"7.0": 64, "8.0": 64, "8.6": 128, "8.7": 128, "8.9": 128, "9.0": 128,
                                     "10.0": 128, "12.0": 128}

# nvmlDeviceGetNvLinkVersion's enum -> the NVLink generation people name (H200 answers 6 = NVLink 4.0).
NVLINK_VERSION_TO_GENERATION = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 6}

# Per-link, per-direction raw rate of each NVLink generation (bytes/s), as NVML's field 164 reports it
# (H200: 26562 MB/s for NVLink 4; NVLink 3 and 5 scaled from their 25 and 50 GB/s nominal the same way).
NVLINK_LINK_SPEED = {3: 25.781e9, 4: 26.562e9, 5: 53.125e9}
NVLINK_MAX_LINKS = 18  # per GPU, Hopper and Blackwell
# The most a busbw can read above links x speed: NVLink SHARP (NVLS) reduces inside the switch, so an
# all_reduce's busbw reads up to ~2x the per-GPU link rate (467 GB/s at 8x H200 with NVLS vs 450 nominal).
IN_SWITCH_REDUCTION = 2.0

DTYPES = ("bf16", "fp8")


def sm_count(compute_capability: str | None, cuda_cores: int | None) -> int | None:
    per_sm = CUDA_CORES_PER_SM.get(compute_capability or "")
    if not per_sm or not cuda_cores:
        return None
    return cuda_cores // per_sm


def math_peak(compute_capability: str | None, sms: int | None, sm_clock_mhz: float | None,
              dtype: str) -> tuple[float | None, str]:
    """(dense flop/s, how it was reached) or (None, what is missing)."""
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
    missing = [name for name, v in (("compute capability", compute_capability), ("SM count", sms),
                                    ("max SM clock", sm_clock_mhz)) if not v]
    if missing:
        return None, f"no {dtype} math peak: NVML gave no {' or '.join(missing)}"
    per_clock = FLOP_PER_SM_PER_CLOCK.get((compute_capability, dtype))
    if per_clock is None:
        return None, f"no {dtype} math peak: sm_{compute_capability.replace('.', '')} has no {dtype} entry in wirecheck.core.gpu_arch"
    peak = sms * sm_clock_mhz * 1e6 * per_clock
    return peak, (f"{sms} SMs x {sm_clock_mhz:g} MHz x {per_clock} flop/clock/SM "
                  f"(sm_{compute_capability.replace('.', '')} {dtype} dense) = {peak / 1e12:.1f} TFLOP/s")


def memory_peak(bus_width_bits: int | None, mem_clock_mhz: float | None) -> tuple[float | None, str]:
    """(bytes/s, how it was reached) or (None, what is missing): bus width / 8 x clock x 2 (double data rate)."""
    missing = [name for name, v in (("memory bus width", bus_width_bits), ("max memory clock", mem_clock_mhz)) if not v]
    if missing:
        return None, f"no memory peak: NVML gave no {' or '.join(missing)}"
    peak = bus_width_bits / 8 * mem_clock_mhz * 1e6 * 2
    return peak, f"{bus_width_bits} bits / 8 x {mem_clock_mhz:g} MHz x 2 = {peak / 1e9:.0f} GB/s"
