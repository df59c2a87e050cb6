"""Is there an NVIDIA driver on this machine at all? Decided from evidence, without NVML.

`wirecheck validate` may fall back to a simulated run only on a machine that has no NVIDIA
driver whatsoever (a laptop, a CPU CI runner). On a GPU node whose driver or NVML is broken the
same NVML failure must fail the run instead: a dry run there would read as an accepted node.
NVML's own error cannot tell the two apart reliably (a missing library and a broken install both
surface as "library not found" or "driver not loaded"), so the question is answered from the
traces a driver install leaves, any one of which means "this is meant to be a GPU machine".
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

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
