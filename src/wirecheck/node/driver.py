"""Is this machine meant to have GPUs? Decided from evidence, without NVML.

`wirecheck validate` may fall back to a simulated run only on a machine that cannot hold a GPU: no
NVIDIA GPU on its PCI bus (wirecheck.node.pci), no trace of an NVIDIA driver, and no --profile naming
the GPU node it is to be (a laptop, a CPU CI runner). On a GPU node whose driver or NVML is missing or
broken the same NVML failure must stop the run instead, from both faces (`pytest` and `wirecheck
validate`, exit 11): a dry run there would read as a node. NVML's own error cannot tell the two apart
reliably (a missing library and a broken install both surface as "library not found" or "driver not
loaded"), so the question is answered from the bus and from the traces a driver install leaves, any one
of which means "this is meant to be a GPU machine" (`gpus_expected`); `unreadable` words the refusal.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

from wirecheck.node import pci

# The kernel module's proc directory: present while nvidia.ko is loaded. Kernel-wide, so a
# container on a GPU host sees it even when it was given no GPU (which must fail, not simulate).
PROC_DRIVER = Path("/proc/driver/nvidia")
# The control device node the driver (or nvidia-modprobe, or the container runtime when it
# hands GPUs in) creates; NVML and CUDA open it before anything else.
CONTROL_DEVICE = Path("/dev/nvidiactl")
# NVML's user-space library, installed with the driver (never by pip: nvidia-ml-py is only the
# binding). Loadable while the kernel module is not loaded means a broken or half-done install,
# e.g. a kernel update whose module was never rebuilt.
NVML_LIBRARY = "libnvidia-ml.so.1"


@dataclass(frozen=True)
class DriverEvidence:
    kernel_module: bool  # PROC_DRIVER exists
    control_device: bool  # CONTROL_DEVICE exists
    nvml_library: bool  # NVML_LIBRARY loads
    proc_driver: str = str(PROC_DRIVER)
    device: str = str(CONTROL_DEVICE)
    library: str = NVML_LIBRARY

    @property
    def present(self) -> bool:
        """True if any trace of an NVIDIA driver is here: then NVML must work."""
        return self.kernel_module or self.control_device or self.nvml_library

    def describe(self) -> str:
        """What was found, for messages: "/proc/driver/nvidia present, /dev/nvidiactl absent, ..."."""
        return ", ".join(
            [
                f"{self.proc_driver} {'present' if self.kernel_module else 'absent'}",
                f"{self.device} {'present' if self.control_device else 'absent'}",
                f"{self.library} {'loads' if self.nvml_library else 'not loadable'}",
            ]
        )

    def missing(self) -> list[str]:
        """What of the driver is not here, for a message ([] when every trace is: then NVML itself fails)."""
        out = []
        if not self.kernel_module:
            out.append(f"the NVIDIA kernel module ({self.proc_driver} absent)")
        if not self.control_device:
            out.append(f"its control device ({self.device} absent)")
        if not self.nvml_library:
            out.append(f"NVML's library ({self.library} not loadable)")
        return out


def gpus_expected(profile: str | None, evidence: DriverEvidence, pci_gpus: tuple[str, ...]) -> list[str]:
    """Why this machine is meant to have GPUs NVML can read, each a phrase; [] where nothing says so (no NVIDIA
    GPU on the PCI bus, no driver trace, no --profile): a machine without GPUs, where a dry run may stand in."""
    reasons = []
    if pci_gpus:
        reasons.append(pci.describe(pci_gpus))
    if profile:
        reasons.append(f"--profile {profile} names the GPU node this is to be")
    if evidence.present:
        reasons.append(f"an NVIDIA driver is installed ({evidence.describe()})")
    return reasons


def unreadable(nvml_error: str, reasons: list[str], evidence: DriverEvidence, dry_run: str) -> str:
    """The refusal of a GPU machine whose GPUs NVML cannot read: NVML's error, why GPUs are expected, what is
    missing and the fix; `dry_run`: the command for a dry run on purpose (`pytest --simulate`)."""
    missing = evidence.missing()
    what = (f"missing: {', '.join(missing)}" if missing
            else "every part of the driver is here and NVML still fails (a driver and kernel module of different "
                 "versions, a GPU fallen off the bus: dmesg)")
    return (f"NVML failed: {nvml_error}\n"
            f"This is a GPU machine whose GPUs cannot be read, not a machine without GPUs: {'; '.join(reasons)}; "
            f"{what}. Nothing was validated. Make `nvidia-smi` list the GPUs (install or load the NVIDIA driver; in "
            f"a container, give it GPU access), or for a dry run on purpose: {dry_run}")


def _loads(library: str) -> bool:
    try:
        ctypes.CDLL(library)  # only dlopen: NVML is not initialised, nothing is touched
    except OSError:
        return False
    return True


def detect(
    proc_driver: Path = PROC_DRIVER, control_device: Path = CONTROL_DEVICE, library: str = NVML_LIBRARY
) -> DriverEvidence:
    """Look for the driver's traces (the arguments exist for the self-tests)."""
    return DriverEvidence(
        kernel_module=proc_driver.exists(),
        control_device=control_device.exists(),
        nvml_library=_loads(library),
        proc_driver=str(proc_driver),
        device=str(control_device),
        library=library,
    )
