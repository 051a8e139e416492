"""NVIDIA parsers on recorded outputs, and the probe against real fake tools."""

from __future__ import annotations

from pathlib import Path

from ftmanifest.probe import nvidia
from ftmanifest.probe._context import ProbeContext
from ftmanifest.probe.devices import DeviceGroup, GpuDevice, group_devices

L40S_FIELDS = ("name", "driver_version", "memory.total", "compute_cap")


def test_query_csv_of_eight_a100s_groups_into_one_row(kit):
    devices, driver = nvidia.parse_query_csv(kit.text("nvidia_smi_query_a100_40gb_x8.csv"))
    assert len(devices) == 8
    assert driver == "580.126.09"
    assert group_devices(devices) == (DeviceGroup("NVIDIA A100-SXM4-40GB", "8.0", 40960, 8),)


def test_query_csv_of_eight_h100s(kit):
    devices, driver = nvidia.parse_query_csv(kit.text("nvidia_smi_query_h100_x8.csv"))
    assert group_devices(devices) == (DeviceGroup("NVIDIA H100 80GB HBM3", "9.0", 81559, 8),)
    assert driver == "565.57.01"


def test_query_csv_with_units_and_another_field_order(kit):
    """Verbatim capture: 4x L40S, memory with its ' MiB' unit, no trailing newline."""
    devices, driver = nvidia.parse_query_csv(kit.text("nvidia_smi_query_l40s_x4.csv"), L40S_FIELDS)
    assert group_devices(devices) == (DeviceGroup("NVIDIA L40S", "8.9", 46068, 4),)
    assert driver == "570.172.08"


def test_mixed_devices_keep_first_seen_order():
    text = "NVIDIA L4, 8.9, 23034, 550.54.15\nNVIDIA A10G, 8.6, 23028, 550.54.15\n"
    text += "NVIDIA L4, 8.9, 23034, 550.54.15\n"
    devices, _ = nvidia.parse_query_csv(text)
    assert [(g.name, g.count) for g in group_devices(devices)] == [
        ("NVIDIA L4", 2),
        ("NVIDIA A10G", 1),
    ]


def test_not_available_values_and_junk_lines():
    text = "No devices were found\nNVIDIA A100-SXM4-80GB, [N/A], [N/A], 535.86.10\n\n"
    devices, driver = nvidia.parse_query_csv(text)
    assert devices == [GpuDevice("NVIDIA A100-SXM4-80GB", None, None)]
    assert driver == "535.86.10"


def test_comma_inside_a_name_stays_in_the_name():
    devices, _ = nvidia.parse_query_csv("Quadro RTX 8000, Lenovo, 7.5, 48601, 535.54.03\n")
    assert devices == [GpuDevice("Quadro RTX 8000, Lenovo", "7.5", 48601)]


def test_header_driver_and_cuda_versions_from_real_banners(kit):
    assert nvidia.parse_header(kit.text("nvidia_smi_l40s_x4.txt")) == ("570.172.08", "12.8")
    assert nvidia.parse_header(kit.text("nvidia_smi_h100_x8_header.txt")) == ("565.57.01", "12.7")
    assert nvidia.parse_header(kit.text("nvidia_smi_a100_40gb_header.txt")) == (
        "580.126.09",
        "13.0",
    )
    assert nvidia.parse_header(kit.text("nvidia_smi_old_header_v100.txt")) == ("535.54.03", "12.2")
    # Recent drivers print 'KMD Version' and 'CUDA UMD Version'.
    assert nvidia.parse_header(kit.text("nvidia_smi_umd_header.txt")) == ("616.92", "13.4")
    assert nvidia.parse_header("") == (None, None)


def test_proc_driver_version_both_module_flavours():
    closed = (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
    )
    opened = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build\n"
    assert nvidia.parse_proc_version(closed) == "535.104.05"
    assert nvidia.parse_proc_version(opened) == "550.54.15"
    assert nvidia.parse_proc_version("garbage") is None


def _fake_smi(kit, bin_dir: Path, query: str, banner: str) -> None:
    kit.tool(
        bin_dir,
        "nvidia-smi",
        f'case "$1" in\n  --query-gpu=*) exec {kit.cat} "{kit.fixtures / query}" ;;\n'
        f'  *) exec {kit.cat} "{kit.fixtures / banner}" ;;\nesac\n',
    )


def test_probe_reads_a_real_tool_on_path(kit, tmp_path):
    _fake_smi(
        kit, tmp_path / "bin", "nvidia_smi_query_h100_x8.csv", "nvidia_smi_h100_x8_header.txt"
    )
    ctx = ProbeContext(environ=kit.env(tmp_path / "bin"), proc_root=tmp_path, nvml=False)
    seen = nvidia.probe(ctx)
    assert seen.seen and seen.tool == "nvidia-smi"
    assert seen.driver == "565.57.01" and seen.api_version == "12.7"
    assert seen.devices == (DeviceGroup("NVIDIA H100 80GB HBM3", "9.0", 81559, 8),)


def test_missing_tool_means_no_driver_seen(kit, tmp_path):
    ctx = ProbeContext(environ=kit.env(tmp_path / "empty"), proc_root=tmp_path, nvml=False)
    seen = nvidia.probe(ctx)
    assert not seen.seen and seen.devices == ()
    assert "no NVIDIA driver seen" in (seen.note or "")
    assert "nvidia-smi not found" in (seen.note or "")


def test_driver_without_tool_is_seen_through_proc(kit, tmp_path):
    proc = tmp_path / "proc" / "driver" / "nvidia"
    proc.mkdir(parents=True)
    (proc / "version").write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
    )
    ctx = ProbeContext(environ=kit.env(tmp_path / "empty"), proc_root=tmp_path, nvml=False)
    seen = nvidia.probe(ctx)
    assert seen.seen and seen.driver == "535.104.05" and seen.devices == ()


def test_failing_tool_is_not_a_driver(kit, tmp_path):
    message = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    kit.tool(tmp_path / "bin", "nvidia-smi", f'echo "{message}"\nexit 9\n')
    ctx = ProbeContext(environ=kit.env(tmp_path / "bin"), proc_root=tmp_path, nvml=False)
    seen = nvidia.probe(ctx)
    assert not seen.seen
    assert "exit 9" in (seen.note or "") and "couldn't communicate" in (seen.note or "")


def test_hanging_tool_times_out(kit, tmp_path):
    kit.tool(tmp_path / "bin", "nvidia-smi", f"exec {kit.sleep} 20\n")
    ctx = ProbeContext(
        environ=kit.env(tmp_path / "bin"), proc_root=tmp_path, nvml=False, timeout=0.3
    )
    seen = nvidia.probe(ctx)
    assert not seen.seen and "timed out after 0.3s" in (seen.note or "")


def test_old_driver_without_compute_cap_is_asked_again(kit, tmp_path):
    kit.tool(
        tmp_path / "bin",
        "nvidia-smi",
        'case "$1" in\n'
        "  *compute_cap*) echo 'Field \"compute_cap\" is not a valid field to query.'; exit 2 ;;\n"
        "  --query-gpu=*) echo 'Tesla V100-SXM2-16GB, 16384, 470.57.02' ;;\n"
        f'  *) exec {kit.cat} "{kit.fixtures / "nvidia_smi_old_header_v100.txt"}" ;;\nesac\n',
    )
    ctx = ProbeContext(environ=kit.env(tmp_path / "bin"), proc_root=tmp_path, nvml=False)
    seen = nvidia.probe(ctx)
    assert seen.devices == (DeviceGroup("Tesla V100-SXM2-16GB", None, 16384, 1),)
    assert seen.driver == "470.57.02"
