"""Probe: NVIDIA driver and GPUs, from nvidia-smi (NVML or /proc as fallbacks).

Layer: probes and runtime - probe (edge).  The parsers are pure functions over the
tools' text and are tested on recorded outputs (tests/fixtures/probe/).  No nvidia-smi,
no NVML and no /proc/driver/nvidia means "no NVIDIA driver seen".
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Sequence

from ftmanifest.probe._context import ProbeContext
from ftmanifest.probe.devices import GpuDevice, GpuObservation, group_devices, parse_int

QUERY_FIELDS: tuple[str, ...] = ("name", "compute_cap", "memory.total", "driver_version")
# Drivers before R510 reject compute_cap; the probe retries without it.
LEGACY_FIELDS: tuple[str, ...] = ("name", "memory.total", "driver_version")

_DRIVER = re.compile(r"(?:Driver|KMD) Version:\s*([0-9][\w.]*)")
_CUDA = re.compile(r"CUDA (?:UMD )?Version:\s*([0-9][\d.]*)")
_PROC = re.compile(r"Kernel Module(?: for \S+)?\s+([0-9]+\.[0-9]+(?:\.[0-9]+)?)")


def query_argv(fields: Sequence[str] = QUERY_FIELDS) -> list[str]:
    return ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]


def _clean(value: str) -> str | None:
    value = value.strip()
    return None if not value or value.startswith("[") or value == "N/A" else value


def parse_query_csv(
    text: str, fields: Sequence[str] = QUERY_FIELDS
) -> tuple[list[GpuDevice], str | None]:
    """Rows of ``nvidia-smi --query-gpu=<fields> --format=csv,noheader[,nounits]``.

    Returns the devices and the driver version (the same on every row).
    Memory may carry a ' MiB' unit when ``nounits`` was not given.
    """
    devices: list[GpuDevice] = []
    driver: str | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        extra = len(parts) - len(fields)
        if extra < 0:
            continue  # not a data row (warnings, truncated output)
        if extra and fields[0] == "name":  # a comma inside the product name
            parts = [", ".join(parts[: extra + 1]), *parts[extra + 1 :]]
        row = dict(zip(fields, parts, strict=False))  # missing trailing fields stay absent
        name = _clean(row.get("name", ""))
        if name is None:
            continue
        devices.append(
            GpuDevice(
                name=name,
                compute_capability=_clean(row.get("compute_cap", "")),
                memory_mib=parse_int(row.get("memory.total", "")),
            )
        )
        driver = driver or _clean(row.get("driver_version", ""))
    return devices, driver


def parse_header(text: str) -> tuple[str | None, str | None]:
    """(driver version, CUDA version) from the banner of plain ``nvidia-smi``.

    Recent Windows drivers print 'KMD Version' / 'CUDA UMD Version' instead.
    """
    driver = _DRIVER.search(text)
    cuda = _CUDA.search(text)
    return (driver.group(1) if driver else None, cuda.group(1) if cuda else None)


def parse_proc_version(text: str) -> str | None:
    """Driver version from /proc/driver/nvidia/version."""
    match = _PROC.search(text)
    return match.group(1) if match else None


def _from_nvml() -> tuple[list[GpuDevice], str | None] | str:
    """Devices and driver through pynvml, or why not.  Only if already installed."""
    if importlib.util.find_spec("pynvml") is None:
        return "pynvml not installed"

    def text(value: object) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    try:
        import pynvml  # optional, never a dependency

        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError has many subclasses; any means "unseen"
        return f"NVML unavailable: {exc}"
    try:
        devices = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
            devices.append(
                GpuDevice(text(pynvml.nvmlDeviceGetName(handle)), f"{major}.{minor}", memory)
            )
        return devices, text(pynvml.nvmlSystemGetDriverVersion())
    except Exception as exc:  # noqa: BLE001
        return f"NVML query failed: {exc}"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001, S110 - shutting down after a failure
            pass


def probe(ctx: ProbeContext) -> GpuObservation:
    result = ctx.run(query_argv(QUERY_FIELDS))
    fields = QUERY_FIELDS
    if result.found and not result.ok and "compute_cap" in (result.stdout + result.stderr):
        fields = LEGACY_FIELDS
        result = ctx.run(query_argv(fields))
    if result.ok:
        devices, driver = parse_query_csv(result.stdout, fields)
        banner = ctx.run(["nvidia-smi"])
        header_driver, cuda = parse_header(banner.stdout) if banner.ok else (None, None)
        return GpuObservation(
            seen=True,
            tool="nvidia-smi",
            driver=driver or header_driver,
            devices=group_devices(devices),
            api_version=cuda,
        )
    note = result.error
    nvml = _from_nvml() if ctx.nvml else "NVML not asked"
    if not isinstance(nvml, str):
        devices, driver = nvml
        return GpuObservation(True, "nvml", driver, group_devices(devices), note=note)
    proc = ctx.read_text("/proc/driver/nvidia/version")
    if proc is not None:
        driver = parse_proc_version(proc)
        return GpuObservation(True, "/proc/driver/nvidia/version", driver, note=note)
    return GpuObservation(seen=False, note=f"no NVIDIA driver seen ({note}; {nvml})")
