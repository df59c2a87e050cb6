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
