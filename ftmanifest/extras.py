"""Which optional package each feature imports, and the line that installs it.

Layer: pure core (stdlib only).  torch, transformers, peft, datasets, trl and
the format readers are optional extras, imported only where a feature needs
them; a command that reaches one that is missing ends with
``MissingExtraError`` (exit 2, the install line as the fix), never as a bug.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ftmanifest.errors import MissingExtraError

# top-level module -> the command that installs it (an extra of ftmanifest where one
# carries it, else the package itself)
INSTALL: dict[str, str] = {
    "torch": "pip install 'ftmanifest[ml]'",
    "transformers": "pip install 'ftmanifest[ml]'",
    "peft": "pip install 'ftmanifest[ml]'",
    "PIL": "pip install 'ftmanifest[ml]'",
    "safetensors": "pip install 'ftmanifest[ml]'",
    "tokenizers": "pip install 'ftmanifest[ml]'",
    "numpy": "pip install 'ftmanifest[ml]'",
    "datasets": "pip install 'ftmanifest[trl]'",
    "trl": "pip install 'ftmanifest[trl]'",
    "pyarrow": "pip install 'ftmanifest[parquet]'",
    "mlflow": "pip install 'ftmanifest[trackers]'",
    "wandb": "pip install 'ftmanifest[trackers]'",
    "accelerate": "pip install accelerate",
    "h5py": "pip install h5py",
    "onnx": "pip install onnx",
    "gguf": "pip install gguf",
    "keras": "pip install keras",
    "joblib": "pip install joblib",
    "model_signing": "pip install 'ftmanifest[interop]'",
}


def install_line(module: str) -> str | None:
    """The install command for ``module`` (or a submodule of it), or None when
    it is no optional package of ftmanifest's."""
    return INSTALL.get(module.partition(".")[0])


def missing_extra(exc: ImportError, feature: str | None = None) -> MissingExtraError | None:
    """``exc`` as the user's to fix, when it is an optional package that is missing.

    Only a module that is absent (``ModuleNotFoundError`` naming one of
    ``INSTALL``) qualifies: an installed package that fails to import is a
    broken install, and a missing ``ftmanifest`` module is a bug."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    line = install_line(exc.name)
    if line is None:
        return None
    return MissingExtraError(exc.name.partition(".")[0], line, feature=feature)


def require(module: str, feature: str) -> ModuleType:
    """``import module`` for ``feature``, or ``MissingExtraError`` with the install line."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        err = missing_extra(exc, feature)
        if err is None:
            raise
        raise err from exc
