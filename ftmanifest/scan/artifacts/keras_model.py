"""Keras ``.keras`` archives: the model's ``config.json`` says what loading it runs.

Layer: judging rooms - pure core scanner rules (JSON in, findings out).  A ``.keras``
file is a zip of ``metadata.json``, ``config.json`` and ``model.weights.h5`` (arrays
only).  Loading rebuilds every object the config names:

- a ``Lambda`` layer carries its function as marshalled Python bytecode
  (Keras 3: ``"class_name": "__lambda__"``; Keras 2: ``function_type``
  ``"lambda"`` and ``[code, defaults, closure]``), as source text
  (``function_type: "raw"``) or by name, run by Keras 2 and by Keras 3 with
  ``safe_mode=False``: every ``Lambda``, whatever its function, is an error
  (``keras.lambda-layer``);
- an object whose ``module`` is not Keras's own is imported from that module,
  and a ``registered_name`` of a custom object needs its code: a warning
  (``keras.custom-object``);
- a config that is not JSON is an error (``keras.unreadable``).

The weights file is data; the scanner only checks it reads whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ftmanifest.findings import Finding
from ftmanifest.manifest.jsonkeys import unique_keys
from ftmanifest.scan.unscanned import REEXPORT_HINT, malformed

KERAS_MODULES = ("keras", "tf_keras", "tensorflow.keras", "keras_hub", "keras_nlp", "keras_cv")
MAX_DEPTH = 200


def is_keras_archive(names: list[str]) -> bool:
    return "config.json" in names and "metadata.json" in names


def judge_config(where: str, member: str, raw: bytes) -> list[Finding]:
    try:
        config = json.loads(raw.decode("utf-8"), object_pairs_hook=unique_keys(_duplicate))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        why = f"config.json is not JSON: {exc}"
        return [malformed(where, "keras.unreadable", why, member, expected="a JSON object",
                          hint=REEXPORT_HINT)]  # fmt: skip
    out: list[Finding] = []
    seen: set[tuple[str, str]] = set()
    lambdas: list[str] = []  # a Keras 3 Lambda holds its __lambda__: one finding for both
    try:
        for obj, path in _objects(config, "", 0):
            finding = _judge(where, member, obj, path)
            if finding is not None and finding.rule == "keras.lambda-layer":
                if any(path.startswith(outer + ".") for outer in lambdas):
                    continue
                lambdas.append(path)
            if finding is not None and (finding.rule, str(finding.observed)) not in seen:
                seen.add((finding.rule, str(finding.observed)))
                out.append(finding)
    except _TooDeep as exc:
        at = str(exc)[:80] + ("…" if len(str(exc)) > 80 else "")
        why = f"config.json nests past {MAX_DEPTH} levels at {at}: what lies below is not read"
        out.append(malformed(where, "keras.unreadable", why, member,
                             expected=f"a config at most {MAX_DEPTH} levels deep",
                             observed=f"deeper than {MAX_DEPTH} levels at {at}",
                             hint=REEXPORT_HINT))  # fmt: skip
    return out


def _duplicate(key: str) -> ValueError:
    return ValueError(f"duplicate key {key!r}")


class _TooDeep(Exception):
    """A config nested past ``MAX_DEPTH``: what lies below is not read, so not judged."""


def _objects(node: Any, path: str, depth: int) -> Iterator[tuple[dict[str, Any], str]]:
    if depth > MAX_DEPTH:
        raise _TooDeep(path)
    if isinstance(node, dict):
        yield node, path or "$"
        for key, value in node.items():
            yield from _objects(value, f"{path}.{key}", depth + 1)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _objects(value, f"{path}[{i}]", depth + 1)


def _judge(where: str, member: str, obj: dict[str, Any], path: str) -> Finding | None:
    class_name, module = obj.get("class_name"), obj.get("module")
    if class_name in ("__lambda__", "Lambda") or _keras2_lambda(obj):
        return Finding(
            kind="unsafe-model",
            rule="keras.lambda-layer",
            message=f"a Lambda layer at {path} carries a function (bytecode, source text or a "
            "name) that loading rebuilds and runs (Keras 2, or Keras 3 with safe_mode=False)",
            path=where,
            field=member,
            severity="error",
            expected="layers Keras builds from their config",
            observed=f"Lambda at {path}",
            hint="load it only with safe_mode=True, or rebuild the model without Lambda layers",
            extra={"member": member, "at": path},
        )
    registered = obj.get("registered_name")
    foreign = isinstance(module, str) and not _keras_module(module)
    custom = isinstance(registered, str) and ">" in registered
    if foreign or custom:
        name = f"{module}.{class_name}" if foreign else str(registered)
        return Finding(
            kind="unsafe-model",
            rule="keras.custom-object",
            message=f"{path} names {name}, whose code loading imports or needs",
            path=where,
            field=member,
            severity="warning",
            expected="objects from Keras's own modules",
            observed=name,
            hint="load it only with the custom objects' code from a source you trust",
            extra={"member": member, "at": path},
        )
    return None


def _keras2_lambda(obj: dict[str, Any]) -> bool:
    """Keras 2 writes a Lambda's function as ``[code, defaults, closure]``, type "lambda"."""
    config = obj.get("config")
    if obj.get("class_name") != "Lambda" or not isinstance(config, dict):
        return False
    function = config.get("function")
    marshalled = isinstance(function, list) and bool(function) and isinstance(function[0], str)
    return config.get("function_type") == "lambda" or marshalled


def _keras_module(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in KERAS_MODULES)
