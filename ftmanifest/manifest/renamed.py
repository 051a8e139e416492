"""Keyword arguments of the public API that were renamed, still accepted for one release.

Layer: pure core, in the manifest room: ``load_manifest`` is the lowest public
function it serves, and every room above may use it.  The public functions give
one concept one keyword (``manifest``, ``trust_path``, ``model_class``,
``base_dir``); a caller that still passes the old name gets the same call and a
``DeprecationWarning`` naming the new one.  Typing stays out of the runtime:
``ftmanifest.manifest`` imports this module, and the pre-commit hook loads it on
its 100 ms budget.
"""

from __future__ import annotations

import functools
import warnings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import ParamSpec, TypeVar

    P = ParamSpec("P")
    R = TypeVar("R")

REMOVED_IN = "0.2"


def renamed_keywords(**renames: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Accept each old keyword (``old="new"``) as the new one, with a DeprecationWarning.

    Passing both names is a ``TypeError``, as Python's own duplicate argument is.
    """

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(func)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            for old, new in renames.items():
                if old not in kwargs:
                    continue
                if new in kwargs:
                    raise TypeError(f"{func.__name__}() got {old}= and {new}=: pass {new}= only")
                warnings.warn(
                    f"{func.__name__}({old}=...) is deprecated and goes in ftmanifest "
                    f"{REMOVED_IN}: write {func.__name__}({new}=...)",
                    DeprecationWarning,
                    stacklevel=2,
                )
                kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        return call

    return decorate
