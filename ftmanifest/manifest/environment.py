"""The ``model`` and ``environment`` sections: what is trained, where.

Layer: pure core - manifest (pure).  Requirements digest items 6 (backend on record) and
8 (only the intended checkpoint revision).
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from ftmanifest.manifest.canonical import canonical_json, sha256_digest
from ftmanifest.manifest.types import (
    Digest,
    FileRef,
    HubRepoId,
    NonEmpty,
    NonNegativeInt,
    Packages,
    PositiveInt,
    Strict,
)

BackendKind = Literal["cuda", "rocm", "mps", "cpu"]


class ModelFile(Strict):
    """One file of the model snapshot."""

    path: NonEmpty = Field(description="Path inside the snapshot, '/'-separated.")
    digest: Digest | None = Field(default=None, description="sha256 digest of the file.")
    size: NonNegativeInt | None = Field(default=None, description="Size in bytes.")


class PublisherSignature(Strict):
    """The publisher's OpenSSF model-signing signature that ``lock`` verified."""

    file: NonEmpty = Field(
        description="The model-signing bundle in the model folder (model.sig); its digest "
        "is pinned among model.files, so a replaced signature is drift."
    )
    method: Literal["key", "certificate"] = Field(
        description="model-signing's signing method; lock verifies the key and certificate methods."
    )
    signer: NonEmpty = Field(
        description="The trust file's principal(s) for the key (certificate method: the CA) "
        "that vouched, comma-separated."
    )
    key: NonEmpty = Field(
        description="That key's OpenSSH SHA256 fingerprint (certificate method: the CA's key)."
    )
    certificate: NonEmpty | None = Field(
        default=None,
        description="Certificate method: the signing certificate's subject and subject "
        "alternative names.",
    )
    authority: NonEmpty | None = Field(
        default=None,
        description="Certificate method: the trusted CA certificate's sha256 fingerprint.",
    )


class ModelSource(Strict):
    """The base model: where it comes from and exactly which bytes."""

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": ["repo"], "properties": {"repo": {"type": "string"}}},
                {"required": ["path"], "properties": {"path": {"type": "string"}}},
            ]
        }
    )

    repo: HubRepoId | None = Field(
        default=None, description="Hugging Face hub repo id, e.g. org/name."
    )
    path: NonEmpty | None = Field(
        default=None, description="Local directory, relative to the manifest's folder."
    )
    revision: str | None = Field(
        default=None, description="The snapshot's 40-hex commit; never a branch or tag."
    )
    files: list[ModelFile] = Field(default_factory=list, description="Every file with its digest.")
    tree_digest: Digest | None = Field(
        default=None, description="Digest over the sorted file list and file digests."
    )
    attn_implementation: NonEmpty | None = Field(
        default=None,
        description="Attention kernel the model computes with (eager, sdpa, flash_attention_2, "
        "flex_attention...), when pinned; the Trainer guard compares the loaded model's.",
    )
    license: str | None = Field(default=None, description="License identifier of the weights.")
    terms_accepted: bool = Field(
        default=False, description="The download terms were read and accepted."
    )
    terms_url: str | None = Field(default=None, description="Where the terms can be read.")
    publisher_signature: PublisherSignature | None = Field(
        default=None,
        description="Filled by lock when the model folder holds model.sig (OpenSSF "
        "model-signing) that verifies with a key of the trust file: who signed.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> ModelSource:
        if self.repo is None and self.path is None:
            raise ValueError("give the model as 'repo' (hub id) or 'path' (local folder)")
        return self


class Device(Strict):
    """One kind of accelerator and how many of it."""

    name: NonEmpty = Field(description="Device name as the driver reports it.")
    compute_capability: str | None = Field(
        default=None, description="CUDA compute capability (8.0) or gfx target (gfx942)."
    )
    memory_mib: PositiveInt | None = Field(default=None, description="Device memory in MiB.")
    count: PositiveInt = Field(default=1, description="How many of this device.")


class Backend(Strict):
    """The accelerator stack actually used."""

    kind: BackendKind | None = Field(default=None, description="cuda, rocm, mps or cpu.")
    runtime: str | None = Field(
        default=None, description="CUDA or HIP runtime version (macOS version for mps)."
    )
    dnn: str | None = Field(default=None, description="cuDNN or MIOpen version.")
    collectives: str | None = Field(default=None, description="NCCL or RCCL version.")
    driver: str | None = Field(default=None, description="Kernel driver version.")
    devices: list[Device] = Field(default_factory=list, description="Accelerators used.")


class CodeRef(Strict):
    """The training code's version."""

    repo: str | None = Field(default=None, description="Where the training code lives.")
    commit: str | None = Field(default=None, description="40-hex git commit of the training code.")
    dirty: bool = Field(default=False, description="Uncommitted changes were present.")


class InterpreterPolicy(Strict):
    """Code the guard lets the training interpreter run without judging it.

    The in-process guard (``ftmanifest.guard``, the Trainer callback) judges every
    imported module's file against the pinned commit, its distribution's RECORD or
    the standard library, and refuses the rest; what is listed here is accepted as
    it is, on the manifest's signature."""

    allow_paths: list[NonEmpty] = Field(
        default_factory=list,
        description="Files or folders (absolute, or relative to the manifest's folder) "
        "whose modules, .pth files, sitecustomize and preloaded libraries the guard accepts "
        "unjudged. A file an installed RECORD lists is still judged by it.",
    )


class Environment(Strict):
    """Software and hardware the run depends on, with versions actually used."""

    python: str | None = Field(default=None, description="Exact Python version, e.g. 3.11.7.")
    packages: Packages = Field(
        default_factory=dict, description="Distribution name -> exact pin, e.g. '==2.13.0'."
    )
    lock: FileRef | None = Field(default=None, description="Lock file of the environment.")
    backend: Backend = Field(default_factory=Backend, description="Accelerator stack.")
    attn_implementation: str | None = Field(
        default=None, description="Attention kernel: eager, sdpa, flash_attention_2..."
    )
    env_vars: dict[NonEmpty, str] = Field(
        default_factory=dict,
        description="Environment variables that change results, e.g. CUBLAS_WORKSPACE_CONFIG.",
    )
    code: CodeRef = Field(default_factory=CodeRef, description="Training code version.")
    interpreter: InterpreterPolicy | None = Field(
        default=None,
        description="What the in-process guard accepts in the training interpreter beyond "
        "the pinned code, the installed distributions' RECORDs and the standard library.",
    )


def environment_json(env: Environment) -> bytes:
    """The canonical JSON of ``env`` (what the fingerprint is taken over)."""
    return canonical_json(env.model_dump(mode="json", exclude_none=True))


def fingerprint(env: Environment) -> str:
    """``sha256:<hex>`` of the canonical JSON: equal environments, equal fingerprints."""
    return sha256_digest(environment_json(env))
