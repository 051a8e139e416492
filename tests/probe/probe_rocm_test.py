"""AMD parsers on recorded outputs, and the probe against real fake tools."""

from __future__ import annotations

import json

import pytest

from ftmanifest.probe import rocm
from ftmanifest.probe._context import ProbeContext
from ftmanifest.probe.devices import DeviceGroup, GpuDevice


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        ("gfx9010", "gfx90a"),  # MI250X as rocm-smi prints it (recorded)
        ("gfx942", "gfx942"),  # MI300X
        ("gfx1100", "gfx1100"),  # RX 7900 XT (recorded)
        ("gfx1030", "gfx1030"),
        ("gfx9012", "gfx90c"),
        ("gfx90a", "gfx90a"),  # already in LLVM form (amd-smi)
        ("gfx950", "gfx950"),
        (None, None),
        ("", None),
    ],
)
def test_gfx_targets_are_written_the_llvm_way(reported, expected):
    assert rocm.normalize_gfx(reported) == expected


def test_rocm_smi_mi250x_productname(kit):
    devices, driver = rocm.parse_rocm_smi_json(kit.text("rocm_smi_mi250x_productname.json"))
    assert devices == [GpuDevice("AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2", "gfx90a", None)]
    assert driver is None


def test_rocm_smi_productname_with_meminfo(kit):
    devices, _ = rocm.parse_rocm_smi_json(kit.text("rocm_smi_rx7900xt.json"))
    # 21458059264 B // 2**20
    assert devices == [GpuDevice("Radeon RX 7900 XT", "gfx1100", 20464)]


def test_rocm_smi_meminfo_alone_has_no_name_so_no_device(kit):
    devices, _ = rocm.parse_rocm_smi_json(kit.text("rocm_smi_mi300x_meminfo.json"))
    assert devices == []


def test_rocm_smi_driver_under_system_and_cards_in_numeric_order(kit):
    card = json.loads(kit.text("rocm_smi_mi250x_productname.json"))["card0"]
    doc = {f"card{i}": dict(card, **{"VRAM Total Memory (B)": "68702699520"}) for i in (10, 2, 0)}
    doc["system"] = {"Driver version": "6.7.0"}
    devices, driver = rocm.parse_rocm_smi_json(json.dumps(doc))
    assert driver == "6.7.0"
    assert len(devices) == 3 and devices[0].memory_mib == 65520


@pytest.mark.parametrize("text", ["", "No JSON data to report\n", "{not json", "[1, 2]"])
def test_rocm_smi_without_data(text):
    assert rocm.parse_rocm_smi_json(text) == ([], None)


def test_amd_smi_rocm7_wrapper(kit):
    devices, driver = rocm.parse_amd_smi_static(kit.text("amd_smi_static_mi300x_trimmed.json"))
    assert devices == [GpuDevice("AMD Instinct MI300X", "gfx942", 196592)] * 2
    assert driver == "6.16.13"


def test_amd_smi_pre_rocm7_bare_list_after_a_permission_banner(kit):
    gpus = json.loads(kit.text("amd_smi_static_mi300x_trimmed.json"))["gpu_data"]
    text = "Permission needed to access required GPU device node(s):\n" + json.dumps(gpus)
    devices, driver = rocm.parse_amd_smi_static(text)
    assert len(devices) == 2 and driver == "6.16.13"


@pytest.mark.parametrize(
    ("size", "mib"),
    [
        ({"value": 196592, "unit": "MB"}, 196592),
        ({"value": 64, "unit": "GB"}, 65536),
        ({"value": 68702699520, "unit": "B"}, 65520),
        ("N/A", None),
        ({"value": "N/A"}, None),
    ],
)
def test_amd_smi_sizes(size, mib):
    assert rocm._size_mib(size) == mib


def test_probe_prefers_amd_smi(kit, tmp_path):
    bin_dir = tmp_path / "bin"
    kit.cat_tool(bin_dir, "amd-smi", "amd_smi_static_mi300x_trimmed.json")
    kit.tool(bin_dir, "rocm-smi", "exit 1\n")
    seen = rocm.probe(ProbeContext(environ=kit.env(bin_dir), proc_root=tmp_path))
    assert seen.seen and seen.tool == "amd-smi" and seen.driver == "6.16.13"
    assert seen.devices == (DeviceGroup("AMD Instinct MI300X", "gfx942", 196592, 2),)


def test_probe_falls_back_to_rocm_smi(kit, tmp_path):
    bin_dir = tmp_path / "bin"
    kit.cat_tool(bin_dir, "rocm-smi", "rocm_smi_rx7900xt.json")
    seen = rocm.probe(ProbeContext(environ=kit.env(bin_dir), proc_root=tmp_path))
    assert seen.tool == "rocm-smi"
    assert seen.devices == (DeviceGroup("Radeon RX 7900 XT", "gfx1100", 20464, 1),)
    assert seen.driver is None


def test_no_tools_and_no_kfd_means_no_driver_seen(kit, tmp_path):
    seen = rocm.probe(ProbeContext(environ=kit.env(tmp_path / "none"), proc_root=tmp_path))
    assert not seen.seen
    assert "amd-smi not found" in (seen.note or "") and "rocm-smi not found" in (seen.note or "")


def test_kfd_and_module_version_without_tools(kit, tmp_path):
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "kfd").write_text("")
    module = tmp_path / "sys" / "module" / "amdgpu"
    module.mkdir(parents=True)
    (module / "version").write_text("6.7.0\n")
    seen = rocm.probe(ProbeContext(environ=kit.env(tmp_path / "none"), proc_root=tmp_path))
    assert seen.seen and seen.driver == "6.7.0" and seen.devices == ()
