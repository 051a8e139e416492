"""The base model an adapter is bound to or checked against, as found here.

Layer: judging rooms - edge (finds folders, hashes files).  A base comes from a manifest
(``model.path`` or the cached hub snapshot of ``model.repo@revision``, found
and hashed by ``observe.observe_model`` as ``verify`` does), from a folder, or
from a hub repo id and revision.  ``pinned_base_drift`` says where the base
here differs from what the manifest pins (``bind`` refuses to bind to a
drifted base).  Everything but ``BaseModel.tensors`` reads headers and file
digests only; ``tensors`` is the tensor digest (cached by stat).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ftmanifest.adapter.architecture import finding, method_findings
from ftmanifest.adapter.loadable import (
    base_config_findings,
    base_stray_findings,
    base_weight_files,
    config_digest,
)
from ftmanifest.adapter.tensors import TensorDigest, tensor_digest, tensor_index
from ftmanifest.errors import FtManifestError, InputError, InputNotFoundError
from ftmanifest.findings import Finding
from ftmanifest.fsutil import resolve_inside
from ftmanifest.hfcache import hub_snapshot
from ftmanifest.snapshot import observe_model

if TYPE_CHECKING:
    from ftmanifest.manifest.model import Manifest


@dataclass
class BaseModel:
    """A base model folder here, and what is known about where it came from."""

    folder: Path
    repo: str | None = None
    revision: str | None = None
    tree_digest: str | None = None
    symlink_root: Path | None = None
    use_cache: bool = True
    _tensors: TensorDigest | None = field(default=None, repr=False)
    _config: tuple[dict[str, Any] | None] | None = field(default=None, repr=False)

    @property
    def files(self) -> list[Path]:
        """The safetensors files ``from_pretrained`` loads (``loadable``)."""
        if not self.folder.is_dir():
            raise InputNotFoundError(f"model folder not found: {self.folder}",
                                     path=str(self.folder))  # fmt: skip
        return base_weight_files(self.folder, self.config())

    def tensors(self) -> TensorDigest:
        if self._tensors is None:
            self._tensors = tensor_digest(self.files, use_cache=self.use_cache)
        return self._tensors

    def shapes(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        return {n: (e.dtype, e.shape) for n, e in tensor_index(self.files).items()}

    def tensor_bytes(self) -> int:
        """The bytes of tensor data the headers promise (read nothing else)."""
        return sum(e.end - e.begin for e in tensor_index(self.files).values())

    def config(self) -> dict[str, Any]:
        """``config.json`` (model_type, tie_word_embeddings...), or {} when absent."""
        return self.raw_config() or {}

    def raw_config(self) -> dict[str, Any] | None:
        """``config.json`` as read (read once), or None when absent."""
        if self._config is None:
            from ftmanifest.adapter.binding import read_json

            path = self.folder / "config.json"
            try:
                data = read_json(path, "model config.json", "re-save the base with save_pretrained")
            except FileNotFoundError:
                data = None
            if data is not None and not isinstance(data, dict):
                raise InputError("config.json is not a JSON object", path=str(path),
                                 expected="a JSON object", observed=type(data).__name__,
                                 hint="re-save the base with save_pretrained")  # fmt: skip
            self._config = (data,)
        return self._config[0]

    def config_digest(self) -> str | None:
        return config_digest(self.raw_config())

    def stray_findings(self) -> list[Finding]:
        """Files beside the bound weights and config.json that from_pretrained
        reads too (or may): other weights, an adapter, configuration_files."""
        found = base_stray_findings(self.folder, self.files)
        return found + base_config_findings(self.folder, self.config())


def from_folder(folder: str | Path, *, use_cache: bool = True) -> BaseModel:
    """A base folder as it is: judged by its tensor digest alone (its files
    are not hashed again for a tree digest: one read of the weights, not two)."""
    return BaseModel(Path(folder), use_cache=use_cache)


def from_hub(repo: str, revision: str, *, use_cache: bool = True) -> BaseModel:
    """The cached snapshot of ``repo`` at ``revision`` (never downloads)."""
    snap = hub_snapshot(repo, revision)
    return BaseModel(
        snap.folder,
        repo=repo,
        revision=snap.commit or revision,
        symlink_root=snap.symlink_root,
        use_cache=use_cache,
    )


def from_manifest(
    manifest: Manifest, manifest_path: Path, *, use_cache: bool = True, allow_outside: bool = False
) -> tuple[BaseModel, list[Finding]]:
    """The manifest's base as found here, and where it drifted from the pins."""
    state = observe_model(
        manifest, manifest_path.parent, use_cache=use_cache, allow_outside=allow_outside
    )
    if state.error is not None:
        raise state.error
    assert state.folder is not None
    m = manifest.model
    base = BaseModel(
        Path(state.folder),
        repo=m.repo,
        revision=state.commit or m.revision,
        tree_digest=state.tree_digest,
        use_cache=use_cache,
    )
    return base, pinned_base_drift(manifest, manifest_path, state)


def pinned_folder(manifest: Manifest, manifest_path: Path, *, allow_outside: bool = False) -> Path:
    """The folder of the manifest's pinned model here (``model.path`` or the
    cached hub snapshot), found without hashing anything.  A hub snapshot not
    in the cache raises; a ``model.path`` is returned whether or not it exists."""
    m = manifest.model
    if m.path is not None:
        return resolve_inside(manifest_path.parent, m.path, ("model", "path"), allow_outside)
    assert m.repo is not None  # ModelSource._one_source: a path or a repo
    return hub_snapshot(m.repo, m.revision).folder


def pinned_base_drift(manifest: Manifest, manifest_path: Path, state: Any) -> list[Finding]:
    """Rows where the base here differs from the manifest's ``model`` pins."""
    m = manifest.model
    where = str(manifest_path)
    out: list[Finding] = []

    def row(fld: str, expected: str, observed: str, hint: str) -> None:
        out.append(
            Finding(
                kind="adapter",
                rule="adapter.base-drifted",
                message=f"the base model here differs from the manifest at {fld}",
                path=where,
                field=fld,
                expected=expected,
                observed=observed,
                hint=hint,
            )
        )

    fix = f"restore the pinned base, or re-pin it: ftmanifest lock {manifest_path}"
    if m.repo is not None and m.revision and state.commit and state.commit != m.revision:
        row("model.revision", m.revision, state.commit, fix)
    if m.tree_digest is not None and state.tree_digest != m.tree_digest:
        row("model.tree_digest", m.tree_digest, str(state.tree_digest), fix)
    for i, f in enumerate(m.files):
        seen = state.files.get(f.path)
        if f.digest is not None and (seen is None or seen.digest != f.digest):
            row(f"model.files[{i}].digest", f.digest, seen.digest if seen else "absent", fix)
    if m.tree_digest is None and not any(f.digest for f in m.files):
        row(
            "model.tree_digest",
            "a pinned digest",
            "nothing pinned",
            f"pin the base first: ftmanifest lock {manifest_path}",
        )
    return out


def manifest_method_findings(
    manifest: Manifest, manifest_path: Path, *, allow_outside: bool = False
) -> list[Finding]:
    """``architecture.method_findings`` for the manifest's pinned base as found
    here (headers and config only, nothing hashed); [] when the base is not
    here (verify reports that itself) or the method is not LoRA."""
    if getattr(manifest.method, "kind", None) != "lora":
        return []
    try:
        folder = pinned_folder(manifest, manifest_path, allow_outside=allow_outside)
    except FtManifestError:
        return []  # verify reports a base that is not here, row by row
    try:
        base = BaseModel(folder)
        shapes, config = base.shapes(), base.config()
    except FtManifestError as exc:  # unreadable headers or config: not judged is not clean
        return [
            finding(
                "method-unchecked",
                "the method could not be checked against the base",
                path=exc.path or str(manifest_path),
                loc=("method",),
                expected="readable safetensors headers and config.json",
                observed=exc.message,
                hint=exc.hint or "restore the pinned base files",
            )
        ]
    return method_findings(manifest.method, shapes, config, path=str(manifest_path))
