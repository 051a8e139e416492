"""Probe: AMD driver and GPUs, from amd-smi or rocm-smi (JSON output).

Layer: probes and runtime - probe (edge).  Parsers are pure and tested on recorded
outputs.  amd-smi is asked first (it replaces rocm-smi from ROCm 6 on); rocm-smi is the
fallback; /sys/module/amdgpu and /dev/kfd tell a driver is there when neither tool is
installed.  The two tools name the same board differently ('AMD Instinct MI300X' vs 'AMD
Instinct MI300X OAM') and report slightly different memory sizes, so the observation
records which tool answered.
"""

from __future__ import annotations

import json
import re

from ftmanifest.probe._context import ProbeContext
from ftmanifest.probe.devices import GpuDevice, GpuObservation, group_devices, parse_int

AMD_SMI_ARGV = ("amd-smi", "static", "--asic", "--vram", "--driver", "--json")
ROCM_SMI_ARGV = (
    "rocm-smi",
    "--showproductname",
    "--showmeminfo",
    "vram",
    "--showdriverversion",
    "--json",
)
_MIB = 1024 * 1024
_NAME_KEYS = ("Card Series", "Card series", "Device Name", "Card Model", "Card model")
_NUMERIC_GFX = re.compile(r"^gfx(\d{3,5})$")


def normalize_gfx(target: str | None) -> str | None:
    """rocm-smi's decimal 'gfx9010' as the usual target name 'gfx90a'.

    rocm-smi prints major, minor and stepping as decimal numbers side by side
    (gfx_target_version 90010 -> 'gfx9010'), while LLVM and amd-smi write the
    stepping as one hex digit ('gfx90a').  Majors 10 and up have two digits.
    """
    if not target:
        return None
    match = _NUMERIC_GFX.match(target)
    if not match:
        return target
    digits = match.group(1)
    width = 2 if digits.startswith("1") else 1
    major, minor, stepping = digits[:width], digits[width], digits[width + 1 :]
    if not stepping or int(stepping) > 15:
        return target
    return f"gfx{major}{minor}{int(stepping):x}"


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _load_json(text: str) -> object | None:
    """JSON from tool output that may start with a warning banner."""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return None
    try:
        return json.loads(text[min(starts) :])
    except json.JSONDecodeError:
        return None


def _card_index(key: str) -> int:
    digits = key[4:]
    return int(digits) if digits.isdigit() else 1 << 30


def parse_rocm_smi_json(text: str) -> tuple[list[GpuDevice], str | None]:
    """Devices and driver from ``rocm-smi ... --json`` ({'card0': {...}, 'system': {...}})."""
    data = _load_json(text)
    if not isinstance(data, dict):
        return [], None
    devices = []
    for key in sorted((k for k in data if k.startswith("card")), key=_card_index):
        card = data[key]
        if not isinstance(card, dict):
            continue
        name = next((str(card[k]) for k in _NAME_KEYS if card.get(k)), None)
        if name is None:
            continue
        total = parse_int(card.get("VRAM Total Memory (B)"))
        devices.append(
            GpuDevice(
                name=name,
                compute_capability=normalize_gfx(_opt_str(card.get("GFX Version"))),
                memory_mib=total // _MIB if total else None,
            )
        )
    system = data.get("system")
    driver = system.get("Driver version") if isinstance(system, dict) else None
    return devices, driver if isinstance(driver, str) and driver else None


def _size_mib(size: object) -> int | None:
    """amd-smi sizes: {'value': 196592, 'unit': 'MB'}; its 'MB' are MiB."""
    if not isinstance(size, dict):
        return parse_int(size)
    value = parse_int(size.get("value"))
    if value is None:
        return None
    unit = str(size.get("unit", "MB")).upper()
    factor = {"B": 1 / _MIB, "KB": 1 / 1024, "MB": 1, "GB": 1024}.get(unit)
    return int(value * factor) if factor else None


def _section(gpu: dict[str, object], key: str) -> dict[str, object]:
    value = gpu.get(key)
    return value if isinstance(value, dict) else {}


def parse_amd_smi_static(text: str) -> tuple[list[GpuDevice], str | None]:
    """Devices and driver from ``amd-smi static --json``.

    ROCm 7 wraps the list as {'gpu_data': [...]}; before that it was a bare list.
    """
    data = _load_json(text)
    gpus = data.get("gpu_data") if isinstance(data, dict) else data
    if not isinstance(gpus, list):
        return [], None
    devices, driver = [], None
    for gpu in gpus:
        if not isinstance(gpu, dict):
            continue
        asic, board, vram = (_section(gpu, key) for key in ("asic", "board", "vram"))
        name = asic.get("market_name") or board.get("product_name")
        if not name or name == "N/A":
            continue
        size = vram.get("size", vram.get("vram_size"))
        gfx = normalize_gfx(_opt_str(asic.get("target_graphics_version")))
        devices.append(GpuDevice(str(name), gfx, _size_mib(size)))
        drv = gpu.get("driver")
        if driver is None and isinstance(drv, dict):
            found = drv.get("version") or drv.get("driver_version")
            driver = found if isinstance(found, str) and found != "N/A" else None
    return devices, driver


def parse_sys_module_version(text: str) -> str | None:
    """Driver version from /sys/module/amdgpu/version (absent for in-kernel amdgpu)."""
    value = text.strip()
    return value or None


def probe(ctx: ProbeContext) -> GpuObservation:
    notes = []
    for argv, parse in ((AMD_SMI_ARGV, parse_amd_smi_static), (ROCM_SMI_ARGV, parse_rocm_smi_json)):
        result = ctx.run(argv)
        if result.ok:
            devices, driver = parse(result.stdout)
            if devices:
                return GpuObservation(True, argv[0], driver, group_devices(devices))
            notes.append(f"{argv[0]}: no devices in its output")
        else:
            notes.append(result.error or f"{argv[0]} failed")
    version = ctx.read_text("/sys/module/amdgpu/version")
    if version is not None or ctx.exists("/dev/kfd"):
        driver = parse_sys_module_version(version) if version else None
        return GpuObservation(True, "/dev/kfd", driver, note="; ".join(notes))
    return GpuObservation(seen=False, note=f"no AMD driver seen ({'; '.join(notes)})")
