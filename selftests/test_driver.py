"""Driver evidence: simulation is allowed only where no trace of an NVIDIA driver exists."""

from __future__ import annotations

from wirecheck.node.driver import DriverEvidence, detect

NO_LIBRARY = "libwirecheck-no-such-library.so.1"
# A library every Linux has, standing in for libnvidia-ml.so.1 to show that a loadable one counts.
SOME_LIBRARY = "libc.so.6"


def test_nothing_found_means_no_driver(tmp_path):
    evidence = detect(tmp_path / "proc-driver-nvidia", tmp_path / "nvidiactl", NO_LIBRARY)
    assert not evidence.present
    assert "absent" in evidence.describe() and "not loadable" in evidence.describe()


def test_each_trace_alone_means_a_driver(tmp_path):
    proc = tmp_path / "proc-driver-nvidia"
    proc.mkdir()
    assert detect(proc, tmp_path / "nvidiactl", NO_LIBRARY).present  # kernel module loaded
    ctl = tmp_path / "nvidiactl"
    ctl.touch()
    assert detect(tmp_path / "none", ctl, NO_LIBRARY).present  # device node
    with_library = detect(tmp_path / "none", tmp_path / "none2", SOME_LIBRARY)  # NVML library installed
    assert with_library.present and with_library.nvml_library
    assert f"{SOME_LIBRARY} loads" in with_library.describe()


def test_describe_names_every_signal():
    text = DriverEvidence(True, False, False).describe()
    assert "/proc/driver/nvidia present" in text
    assert "/dev/nvidiactl absent" in text
    assert "libnvidia-ml.so.1 not loadable" in text


# -- the PCI bus: GPUs whether or not a driver is loaded ----------------------------------------


def test_the_pci_bus_names_nvidia_display_controllers_only(tmp_path):
    from fake_pci import INTEL_VGA, NVIDIA_3D, NVIDIA_AUDIO, NVIDIA_VGA, NVSWITCH, sysfs
    from wirecheck.node import pci

    root = sysfs(tmp_path / "sys", {"0000:3d:00.0": NVIDIA_3D, "0000:17:00.0": NVIDIA_VGA, "0000:05:00.0": NVSWITCH,
                                    "0000:17:00.1": NVIDIA_AUDIO, "0000:00:02.0": INTEL_VGA})
    assert pci.nvidia_gpus(root) == ("0000:17:00.0", "0000:3d:00.0")
    assert pci.describe(pci.nvidia_gpus(root)) == "the PCI bus shows 2 NVIDIA GPUs (0000:17:00.0, 0000:3d:00.0)"
    assert pci.nvidia_gpus(sysfs(tmp_path / "cpu-only", {"0000:00:02.0": INTEL_VGA})) == ()
    assert pci.nvidia_gpus(tmp_path / "no-sysfs") == ()  # nothing to read: nothing found, never a traceback


def test_gpus_are_expected_where_any_evidence_says_so():
    from wirecheck.node.driver import gpus_expected, unreadable

    none = DriverEvidence(False, False, False)
    assert gpus_expected(None, none, ()) == []  # only here may a dry run stand in
    assert gpus_expected("h200-sxm-2", none, ()) == ["--profile h200-sxm-2 names the GPU node this is to be"]
    assert gpus_expected(None, none, ("0000:17:00.0",)) == ["the PCI bus shows 1 NVIDIA GPU (0000:17:00.0)"]
    assert gpus_expected(None, DriverEvidence(False, False, True), ())[0].startswith("an NVIDIA driver is installed")
    text = unreadable("NVML could not start (X)", ["the PCI bus shows 1 NVIDIA GPU (0000:17:00.0)"],
                      DriverEvidence(True, True, True), "pytest --simulate")
    assert "every part of the driver is here and NVML still fails" in text and text.endswith("pytest --simulate")
