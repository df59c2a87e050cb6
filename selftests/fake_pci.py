"""A fake /sys tree of PCI devices (vendor and class files), for wirecheck.node.pci's readers."""

from __future__ import annotations

from pathlib import Path

NVIDIA_3D = ("0x10de", "0x030200")  # an H100/H200 SXM or PCIe card: a 3D controller
NVIDIA_VGA = ("0x10de", "0x030000")  # a card with display outputs
NVSWITCH = ("0x10de", "0x068000")  # NVIDIA, but a bridge: not a GPU
NVIDIA_AUDIO = ("0x10de", "0x040300")  # a card's HDMI audio function: not a GPU
INTEL_VGA = ("0x8086", "0x030000")  # a GPU, not NVIDIA's


def sysfs(root: Path, devices: dict[str, tuple[str, str]]) -> Path:
    """`root` laid out as /sys with `devices` (PCI address -> (vendor, class)) under bus/pci/devices."""
    for address, (vendor, klass) in devices.items():
        d = root / "bus" / "pci" / "devices" / address
        d.mkdir(parents=True)
        (d / "vendor").write_text(vendor + "\n")
        (d / "class").write_text(klass + "\n")
    (root / "bus" / "pci" / "devices").mkdir(parents=True, exist_ok=True)
    return root
