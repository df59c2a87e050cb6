"""NVIDIA GPUs on the PCI bus, read from sysfs: what the machine holds whether or not a driver is loaded.

A device is an NVIDIA GPU when its vendor is 0x10de and its class is a display controller (0x03xxxx: VGA
0x0300, 3D controller 0x0302, ...); NVIDIA's NVSwitches (bridges, 0x0680) and HDMI audio (0x0403) are not.
The kernel lists every device under /sys/bus/pci/devices whether or not a driver bound it, so a node whose
driver is gone still shows its GPUs here: `wirecheck validate` must then refuse, never simulate.

`sysfs` is the root of the tree read (the self-tests hand a folder of fake devices).
"""

from __future__ import annotations

from pathlib import Path

SYSFS = Path("/sys")
NVIDIA_VENDOR = 0x10DE
DISPLAY_CLASS = 0x03  # the PCI base class of display controllers


def _hex(path: Path) -> int | None:
    try:
        return int(path.read_text().strip(), 16)
    except (OSError, ValueError):
        return None


def nvidia_gpus(sysfs: Path | None = None) -> tuple[str, ...]:
    """The PCI addresses of the NVIDIA GPUs on the bus, sorted; () where sysfs lists none (or cannot be read).
    `sysfs`: the tree's root (default SYSFS, read when called)."""
    devices = Path(sysfs or SYSFS) / "bus" / "pci" / "devices"
    try:
        entries = sorted(devices.iterdir())
    except OSError:
        return ()
    return tuple(d.name for d in entries
                 if _hex(d / "vendor") == NVIDIA_VENDOR and ((_hex(d / "class") or 0) >> 16) == DISPLAY_CLASS)


def describe(gpus: tuple[str, ...]) -> str:
    """"the PCI bus shows 8 NVIDIA GPUs (0000:17:00.0, 0000:3d:00.0, ...)" for messages."""
    shown = ", ".join(gpus[:4]) + (", ..." if len(gpus) > 4 else "")
    return f"the PCI bus shows {len(gpus)} NVIDIA GPU{'s' if len(gpus) != 1 else ''} ({shown})"
