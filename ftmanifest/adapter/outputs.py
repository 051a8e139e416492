"""What besides the weights decides an adapter's outputs: the tokenizer and
``generation_config.json`` (and ``config.json``'s values, to name a changed key).

Layer: judging rooms - edge (reads small JSON and tokenizer files of a folder; no torch,
no transformers).  A tokenizer is read as two things:

- its **files** (``TOKENIZER_NAMES``, ``*.tiktoken``, ``additional_chat_templates/``),
  each by its sha256: what a binding pins exactly;
- its **facts**, each a digest of a parsed value: ``vocab`` (``tokenizer.json``
  ``model.vocab``), ``merges``, ``model`` (the rest), ``added_tokens``,
  ``normalizer``, ``pre_tokenizer``, ``post_processor``, ``decoder``,
  ``truncation``, ``padding``; ``chat_template`` wherever transformers finds it
  (``chat_template.jinja``, else ``chat_template.json``, else
  ``tokenizer_config.json``); every other ``tokenizer_config.json`` and
  ``special_tokens_map.json`` key (the special tokens and their flags); any other
  tokenizer file by its bytes (``file.<name>``).  Facts are what a refusal names
  and what decides: a copy re-saved in another key order or with the keys every
  save rewrites (``TOKENIZER_NOISE``) has the same facts.

``generation_config.json`` and ``config.json`` are pinned by their values, less
the keys every save rewrites, so a difference names its key.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ftmanifest.adapter.architecture import finding
from ftmanifest.adapter.loadable import CONFIG_INFORMATIONAL
from ftmanifest.errors import FtManifestError, InputError
from ftmanifest.manifest.jsonkeys import unique_keys
from ftmanifest.untrusted import read_untrusted

TOKENIZER_NAMES = frozenset({
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "chat_template.jinja", "chat_template.json", "vocab.json", "merges.txt", "vocab.txt",
    "tokenizer.model", "spiece.model", "sentencepiece.bpe.model",
})  # fmt: skip
TOKENIZER_SUFFIXES = (".tiktoken",)
TEMPLATES_DIR = "additional_chat_templates"
GENERATION_NAME = "generation_config.json"
# tokenizer_config.json keys a save_pretrained writes from where it was loaded, not settings
TOKENIZER_NOISE = frozenset({"name_or_path", "is_local", "local_files_only", "_commit_hash",
                             "transformers_version", "tokenizer_file"})  # fmt: skip
# generation_config.json: the writer's version, and whether it was derived from config.json
GENERATION_NOISE = frozenset({"transformers_version", "_from_model_config"})
TOKENIZER_JSON_KEYS = ("added_tokens", "normalizer", "pre_tokenizer", "post_processor",
                       "decoder", "truncation", "padding")  # fmt: skip
MAX_BYTES = 512 << 20
HINT = "restore the tokenizer files the adapter was bound with, or bind it again"


@dataclass
class Tokenizer:
    """A folder's tokenizer: files by digest, facts by digest and the file each is read from."""

    files: dict[str, str] = field(default_factory=dict)
    facts: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    vocab: dict[str, int] = field(default_factory=dict)


def tokenizer_paths(folder: Path) -> dict[str, Path]:
    """The tokenizer files of ``folder``, by their name relative to it."""
    out: dict[str, Path] = {}
    try:
        top = sorted(folder.iterdir())
    except OSError:
        return out
    for p in top:
        if p.name in TOKENIZER_NAMES or p.name.endswith(TOKENIZER_SUFFIXES):
            out[p.name] = p
        elif p.name == TEMPLATES_DIR and p.is_dir():
            out.update({f"{TEMPLATES_DIR}/{q.name}": q for q in sorted(p.iterdir())})
    return out


def _digest(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def _value_digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return _digest(text.encode("utf-8"))


def _duplicate(key: str) -> ValueError:
    return ValueError(f"duplicate key {key!r}")


def _read(path: Path, what: str) -> bytes:
    return read_untrusted(path, limit=MAX_BYTES, what=what, hint=HINT)


def _json(path: Path, raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw.decode("utf-8"), object_pairs_hook=unique_keys(_duplicate))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InputError(f"unreadable {path.name}: {exc}", path=str(path),
                         expected="a JSON object", hint=HINT) from None  # fmt: skip
    if not isinstance(data, dict):
        raise InputError(f"{path.name} is not a JSON object", path=str(path), hint=HINT,
                         expected="a JSON object", observed=type(data).__name__)  # fmt: skip
    return data


def read_tokenizer(folder: Path) -> Tokenizer:
    """The tokenizer of ``folder`` (empty when it has none); ``InputError`` when
    a file cannot be read or parsed (not judged is not the same)."""
    tok = Tokenizer()

    def fact(key: str, value: Any, source: str) -> None:
        tok.facts[key], tok.sources[key] = _value_digest(value), source

    templates: dict[str, tuple[Any, str]] = {}
    for name, path in tokenizer_paths(folder).items():
        raw = _read(path, f"tokenizer file {name}")
        tok.files[name] = _digest(raw)
        if name == "tokenizer.json":
            doc = _json(path, raw)
            model = doc.get("model")
            if isinstance(model, dict):
                for part in ("vocab", "merges"):
                    if part in model:
                        fact(part, model[part], name)
                fact("model", {k: v for k, v in model.items() if k not in ("vocab", "merges")},
                     name)  # fmt: skip
                if isinstance(model.get("vocab"), dict):
                    tok.vocab.update(model["vocab"])
            elif model is not None:
                fact("model", model, name)
            for key in TOKENIZER_JSON_KEYS:
                if key in doc:
                    fact(key, doc[key], name)
            for added in doc.get("added_tokens") or []:
                if isinstance(added, dict) and isinstance(added.get("content"), str):
                    tok.vocab[added["content"]] = added.get("id", -1)
        elif name in ("tokenizer_config.json", "special_tokens_map.json"):
            doc = _json(path, raw)
            stem = name.removesuffix(".json")
            for key, value in doc.items():
                if key == "chat_template":
                    templates.setdefault("tokenizer_config", (value, name))
                elif key not in TOKENIZER_NOISE:
                    fact(f"{stem}.{key}", value, name)
        elif name == "chat_template.json":
            templates["json"] = (_json(path, raw).get("chat_template"), name)
        elif name == "chat_template.jinja":
            templates["jinja"] = (raw.decode("utf-8", "replace"), name)
        elif name.startswith(TEMPLATES_DIR + "/"):
            fact(f"chat_template.{Path(name).stem}", raw.decode("utf-8", "replace"), name)
        else:
            fact(f"file.{name}", tok.files[name], name)
    for kind in ("jinja", "json", "tokenizer_config"):  # transformers' order of preference
        if kind in templates:
            fact("chat_template", *templates[kind])
            break
    return tok


def read_generation(folder: Path) -> dict[str, Any] | None:
    """``generation_config.json``'s settings (less ``GENERATION_NOISE``), None when absent."""
    path = folder / GENERATION_NAME
    try:
        raw = _read(path, GENERATION_NAME)
    except FileNotFoundError:
        return None
    return {k: v for k, v in _json(path, raw).items() if k not in GENERATION_NOISE}


@dataclass(frozen=True)
class OutputsPin:
    """What a binding states about the base besides its weights."""

    tokenizer_files: dict[str, str]
    tokenizer_facts: dict[str, str]
    generation: dict[str, Any] | None
    config: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        return {"tokenizer": {"files": dict(self.tokenizer_files),
                              "facts": dict(self.tokenizer_facts)},
                "generationConfig": self.generation, "config": self.config}  # fmt: skip

    @classmethod
    def from_dict(cls, d: Any) -> OutputsPin:
        """``ValueError`` naming what is not a pin."""
        tok = d["tokenizer"]
        gen, cfg = d["generationConfig"], d["config"]
        for name, value in (("generationConfig", gen), ("config", cfg)):
            if value is not None and not isinstance(value, dict):
                raise ValueError(f"base.outputs.{name} is not an object")
        return cls(_str_map(tok["files"], "files"), _str_map(tok["facts"], "facts"), gen, cfg)


def _str_map(value: Any, name: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"base.outputs.tokenizer.{name} is not a map of digests")
    return {str(k): v for k, v in value.items()}


def pin_outputs(folder: Path, config: dict[str, Any] | None) -> OutputsPin:
    """The pin of the base in ``folder`` (its config as read by ``BaseModel``)."""
    tok = read_tokenizer(folder)
    kept = None if config is None else {k: v for k, v in config.items()
                                        if k not in CONFIG_INFORMATIONAL}  # fmt: skip
    return OutputsPin(tok.files, tok.facts, read_generation(folder), kept)


def value_differences(want: dict[str, Any] | None, got: dict[str, Any] | None) -> list[str]:
    """The keys whose values differ (a dict absent counts as empty)."""
    want, got = want or {}, got or {}
    return sorted(k for k in set(want) | set(got) if want.get(k, ...) != got.get(k, ...))


def show(d: dict[str, Any] | None, key: str) -> str:
    if d is None or key not in d:
        return "absent"
    value = d[key]
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)[:200]


def read_or_finding(folder: Path, where: str) -> tuple[Tokenizer | None, list[Any]]:
    """``read_tokenizer``, or the refusal that says it could not be read."""
    try:
        return read_tokenizer(folder), []
    except (FtManifestError, OSError) as exc:
        path = getattr(exc, "path", None) or str(folder)
        return None, [finding(
            "tokenizer-unreadable", f"the {where} tokenizer cannot be read, so it is not judged",
            path=path, field=Path(path).name, expected="readable tokenizer files",
            observed=str(getattr(exc, "message", exc))[:200], hint=HINT,
        )]  # fmt: skip
