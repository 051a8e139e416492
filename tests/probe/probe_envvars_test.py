"""Environment variables that change results, and never a credential."""

from __future__ import annotations

from ftmanifest.probe import envvars
from ftmanifest.probe._context import ProbeContext

TOKEN = "hf_" + "a1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwX"

ENVIRON = {
    "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
    "CUDA_VISIBLE_DEVICES": "0,1",
    "HIP_VISIBLE_DEVICES": "0",
    "PYTHONHASHSEED": "0",
    "NCCL_ALGO": "Ring",
    "NCCL_P2P_DISABLE": "1",
    "TORCH_USE_CUDA_DSA": "1",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_OFFLINE": "1",
    "OMP_NUM_THREADS": "8",
    "CUDA_LAUNCH_BLOCKING": "1",
    # not result-changing
    "HOME": "/home/me",
    "PATH": "/usr/bin",
    "TORCH_HOME": "/home/me/.cache/torch",
    "NCCL_DEBUG_FILE": "/tmp/nccl.log",
    # credentials, some under allowed prefixes
    "HF_TOKEN": TOKEN,
    "HUGGING_FACE_HUB_TOKEN": TOKEN,
    "WANDB_API_KEY": "0123456789abcdef",
    "AWS_SECRET_ACCESS_KEY": "abc",
    "TORCH_SECRET": "x",
    "NCCL_PASSWORD": "x",
    "TORCH_SERVE_KEY": "x",
    "PYTORCH_DB_PASSWORD_FILE": "x",
    "TORCH_HUB_TOKEN_VALUE": "x",
    "TORCH_EXTRA": TOKEN,  # allowed name, token-like value
}


def test_allowlist_and_prefixes_without_secrets_or_locations():
    assert envvars.select(ENVIRON) == {
        "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
        "CUDA_LAUNCH_BLOCKING": "1",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "HF_HUB_OFFLINE": "1",
        "HIP_VISIBLE_DEVICES": "0",
        "NCCL_ALGO": "Ring",
        "NCCL_P2P_DISABLE": "1",
        "OMP_NUM_THREADS": "8",
        "PYTHONHASHSEED": "0",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "TOKENIZERS_PARALLELISM": "false",
        "TORCH_USE_CUDA_DSA": "1",
    }


def test_no_token_value_reaches_the_probe_output():
    seen = envvars.probe(ProbeContext(environ=ENVIRON))
    assert TOKEN not in repr(seen)
    assert not any(envvars.secret_value(v) for v in seen.values())
    assert not any(envvars.secret_name(k) for k in seen if k not in envvars.ALLOWLIST)


def test_secret_names_are_recognised():
    for name in (
        "HF_TOKEN",
        "GITHUB_TOKEN",
        "OPENAI_API_KEY",
        "MY_SECRET",
        "DB_PASSWORD",
        "KEY",
        "SSH_PRIVATE",
        "AUTH",
        "NCCL_AUTH",
        "torch_api_key",
    ):
        assert envvars.secret_name(name), name
    for name in ("CUBLAS_WORKSPACE_CONFIG", "NCCL_IB_HCA", "MONKEY", "TORCH_KEYWORDS_X"):
        assert not envvars.secret_name(name), name


def test_secret_values_are_recognised():
    for value in (
        TOKEN,
        "ghp_" + "x" * 36,
        "sk-" + "y" * 40,
        "AKIA" + "ABCDEFGHIJKLMNOP",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
    ):
        assert envvars.secret_value(value), value
    for value in (":4096:8", "expandable_segments:True", "0,1", "Ring"):
        assert not envvars.secret_value(value), value


def test_allowlisted_name_containing_token_is_kept_but_a_token_value_is_not():
    assert envvars.select({"TOKENIZERS_PARALLELISM": "false"}) == {
        "TOKENIZERS_PARALLELISM": "false"
    }
    assert envvars.select({"CUDA_VISIBLE_DEVICES": TOKEN}) == {}
