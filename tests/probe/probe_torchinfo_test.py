"""torch build read from torch/version.py, never by importing torch."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

from ftmanifest.probe import torchinfo
from ftmanifest.probe._context import ProbeContext

CU124_WHEELS = {"nvidia-cudnn-cu12": "9.1.0.70", "nvidia-nccl-cu12": "2.21.5", "torch": "2.5.1"}


def test_cuda_build_with_cudnn_and_nccl_wheels(kit):
    build = torchinfo.build_from_source(kit.text("torch_version_cu124.py.txt"), CU124_WHEELS)
    assert build.version == "2.5.1+cu124"
    assert build.cuda == "12.4" and build.hip is None
    assert build.cudnn == "9.1.0.70" and build.nccl == "2.21.5"
    assert build.debug is False
    assert build.git_version == "a8d6afb511a69687bbb2b7e88a3cf67917e1697e"


def test_rocm_build(kit):
    build = torchinfo.build_from_source(kit.text("torch_version_rocm62.py.txt"), {})
    assert build.hip == "6.2.41133-dd7f95766" and build.cuda is None
    assert build.cudnn is None and build.nccl is None


def test_cpu_build_of_the_installed_kind(kit):
    build = torchinfo.build_from_source(kit.text("torch_version_cpu_2_13.py.txt"), {})
    assert (build.version, build.cuda, build.hip) == ("2.13.0+cpu", None, None)


def test_fields_in_version_py_win_over_wheels_and_computed_values_are_skipped():
    source = "__version__ = '9.9'\ncudnn = '9.5.1'\nnccl = '2.23.4'\ncuda = compute()\n"
    build = torchinfo.build_from_source(source, CU124_WHEELS)
    assert build.cudnn == "9.5.1" and build.nccl == "2.23.4" and build.cuda is None


def test_cu13_wheel_names_match_too():
    packages = {"nvidia-cudnn-cu13": "9.13.0.50", "nvidia-nccl-cu13": "2.27.7"}
    assert torchinfo.dist_version(packages, torchinfo._CUDNN) == "9.13.0.50"
    assert torchinfo.dist_version(packages, torchinfo._NCCL) == "2.27.7"


def test_installed_torch_is_read_and_matches_its_metadata():
    build = torchinfo.probe(ProbeContext())
    assert build is not None
    assert build.version == metadata.version("torch")


def test_a_torch_that_would_explode_on_import_is_still_read(kit, tmp_path):
    """A torch package whose __init__ raises: the probe must not run it."""
    pkg = tmp_path / "site" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('torch was imported')\n")
    (pkg / "version.py").write_text(kit.text("torch_version_cu124.py.txt"))
    code = (
        "import json, sys\n"
        "from ftmanifest.probe import torchinfo\n"
        "from ftmanifest.probe._context import ProbeContext\n"
        "b = torchinfo.probe(ProbeContext())\n"
        "print(json.dumps([b.version, b.cuda, 'torch' in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(tmp_path / "site"), "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(out.stdout) == ["2.5.1+cu124", "12.4", False]


def test_no_torch_means_none(tmp_path):
    code = (
        "import sys\n"
        "sys.path = [p for p in sys.path if 'site-packages' not in p]\n"
        "from ftmanifest.probe import torchinfo\n"
        "print(torchinfo.find_version_file())\n"
    )
    repo = str(__import__("pathlib").Path(__file__).resolve().parents[2])
    out = subprocess.run(
        [sys.executable, "-S", "-c", code],
        env={"PYTHONPATH": repo, "PATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout.strip() == "None", out.stderr
