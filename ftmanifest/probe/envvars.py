"""Probe: environment variables that change training results.

Layer: probes and runtime - probe (edge) over a pure filter.  A fixed allowlist plus
prefix rules pick the variables; anything whose name looks like a credential (HF_TOKEN,
*_KEY, *_SECRET, *PASSWORD*...) or whose value looks like a token is never recorded,
even under an allowed prefix.  Locations (*_HOME, *_DIR, *_PATH) are left out too: where
a cache lives does not change results, and recording it would report drift on every
other machine.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ftmanifest.probe._context import ProbeContext

ALLOWLIST: frozenset[str] = frozenset(
    {
        # device selection and ordering
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "HSA_OVERRIDE_GFX_VERSION",
        # determinism
        "CUBLAS_WORKSPACE_CONFIG",
        "CUDA_LAUNCH_BLOCKING",
        "NVIDIA_TF32_OVERRIDE",
        "PYTHONHASHSEED",
        # threads
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "TOKENIZERS_PARALLELISM",
        # what gets loaded
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "HF_HUB_DISABLE_XET",
        # distributed layout
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
    }
)
PREFIXES: tuple[str, ...] = (
    "NCCL_",
    "TORCH_",
    "PYTORCH_",
    "CUBLAS_",
    "CUBLASLT_",
    "CUDNN_",
    "MIOPEN_",
    "XLA_",
    "ACCELERATE_",
)
_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|PRIVATE|APIKEY"
    r"|(^|_)KEY($|_)|(^|_)AUTH($|_)"
)
_LOCATION = re.compile(r"_(HOME|DIR|PATH|FILE|CACHE)$")
_SECRET_VALUE = re.compile(
    r"(hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}"
    r"|xox[baprs]-[A-Za-z0-9-]{10,}|-----BEGIN)"
)


def secret_name(name: str) -> bool:
    """A credential-like name: *TOKEN*, *SECRET*, *PASSWORD*, *_KEY, ..."""
    return bool(_SECRET_NAME.search(name.upper()))


def secret_value(value: str) -> bool:
    """A value shaped like a known token (hf_..., ghp_..., sk-..., AKIA..., a PEM key)."""
    return bool(_SECRET_VALUE.search(value))


def is_relevant(name: str) -> bool:
    """On the allowlist, or under an allowed prefix, not a location, not secret-named.

    The allowlist is curated, so its names skip the name rule
    (TOKENIZERS_PARALLELISM contains 'TOKEN' and is wanted).
    """
    if name in ALLOWLIST:
        return True
    return name.startswith(PREFIXES) and not _LOCATION.search(name) and not secret_name(name)


def select(environ: Mapping[str, str]) -> dict[str, str]:
    """Pure: the result-changing variables of ``environ``, sorted, secrets removed."""
    return {
        name: environ[name]
        for name in sorted(environ)
        if is_relevant(name) and not secret_value(environ[name])
    }


def probe(ctx: ProbeContext) -> dict[str, str]:
    return select(ctx.environ)
