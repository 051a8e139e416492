"""The hub and modules caches as huggingface_hub and transformers compute them.

``hfcache.hub_cache_dir(environ)`` and ``modules_cache_dir(environ)`` re-evaluate
``huggingface_hub.constants.HF_HUB_CACHE`` and ``transformers.utils.hub.HF_MODULES_CACHE``
for a given environment.  A differential test holds them to the libraries
installed here: one child process sets each environment, re-executes both
modules (``importlib.reload``, the same code an import runs) and prints what
they computed; a few environments are also checked in fresh processes, so
the reload stands for a real start.
"""

from __future__ import annotations

import json
import os
import pwd
import random
import subprocess
import sys
from pathlib import Path

from ftmanifest.hfcache import (
    hf_home,
    hub_cache_dir,
    hub_cache_path,
    legacy_transformers_cache,
    modules_cache_dir,
    modules_cache_path,
)

_VARS = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME", "HOME",
         "HF_MODULES_CACHE", "FOO")  # fmt: skip
_USER = pwd.getpwuid(os.getuid()).pw_name
_VALUES = (
    "", "/abs/cache", "rel/cache", "~", "~/c", f"~{_USER}/c", "~nosuchuser-ftm/c",
    "$FOO/c", "${FOO}c", "$UNSET_FTM/c", "/a/$HOME/b", "~/$FOO", "/x/", "$", "${unclosed",
)  # fmt: skip

_LIBRARY = r"""
import importlib, json, os, sys
import huggingface_hub.constants as c
import transformers.utils.hub as h
out = []
for env in json.loads(sys.stdin.read()):
    os.environ.clear()
    os.environ.update(env)
    importlib.reload(c)
    importlib.reload(h)
    out.append([c.HF_HOME, c.HF_HUB_CACHE, h.HF_MODULES_CACHE])
print(json.dumps(out))
"""


def _environments(n: int, seed: int = 0) -> list[dict[str, str]]:
    rng = random.Random(seed)
    envs: list[dict[str, str]] = [{}]
    for name in _VARS:  # each variable alone, with each value
        envs += [{name: v} for v in _VALUES]
    while len(envs) < n:
        names = rng.sample(_VARS, rng.randint(2, len(_VARS)))
        envs.append({name: rng.choice(_VALUES) for name in names})
    return envs


def _ours(env: dict[str, str]) -> list[str]:
    return [hf_home(env), hub_cache_path(env), modules_cache_path(env)]


def test_the_caches_are_computed_as_the_libraries_compute_them() -> None:
    envs = _environments(600)
    done = subprocess.run(
        [sys.executable, "-c", _LIBRARY],
        input=json.dumps(envs),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    theirs = json.loads(done.stdout.splitlines()[-1])
    differ = [(env, t, _ours(env)) for env, t in zip(envs, theirs, strict=True) if t != _ours(env)]
    assert differ == [], differ[:5]
    # the environments reach every rule: legacy variable, ~user, $VAR, relative, empty
    seen = {hub_cache_path(e) for e in envs}
    assert {"/abs/cache", "rel/cache", "", "hub"} <= seen
    assert any(p.startswith(pwd.getpwnam(_USER).pw_dir) for p in seen)


def test_a_fresh_interpreter_computes_the_same() -> None:
    envs = [
        {"HF_HOME": "/h", "HUGGINGFACE_HUB_CACHE": "/legacy"},
        {"HF_HOME": "/h", "HUGGINGFACE_HUB_CACHE": "/legacy", "HF_HUB_CACHE": "/new"},
        {"XDG_CACHE_HOME": "/xdg", "HOME": "/home/x"},
        {"HOME": "/home/x", "HF_HUB_CACHE": "~/hub", "HF_MODULES_CACHE": "~/mods"},
        {"FOO": "/foo", "HF_HOME": "$FOO/home"},
        {},  # no HOME: the password database's home
    ]
    hub = (
        "import json, huggingface_hub.constants as c;print(json.dumps([c.HF_HOME, c.HF_HUB_CACHE]))"
    )
    both = (  # transformers takes seconds to import: two environments only
        "import json, huggingface_hub.constants as c, transformers.utils.hub as h;"
        "print(json.dumps([c.HF_HOME, c.HF_HUB_CACHE, h.HF_MODULES_CACHE]))"
    )
    for i, env in enumerate(envs):
        code = both if i in (0, 3) else hub
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        got = json.loads(done.stdout.splitlines()[-1])
        assert got == _ours(env)[: len(got)], env


def test_the_legacy_variable_wins_over_hf_home() -> None:
    """The combination verify used to get wrong: HF_HOME and HUGGINGFACE_HUB_CACHE."""
    env = {"HF_HOME": "/home-cache", "HUGGINGFACE_HUB_CACHE": "/legacy-hub"}
    assert hub_cache_dir(env) == Path("/legacy-hub")
    assert modules_cache_dir(env) == Path("/home-cache/modules")
    assert hub_cache_dir({**env, "HF_HUB_CACHE": "/new"}) == Path("/new")


def test_this_process_is_the_default() -> None:
    assert hub_cache_dir() == hub_cache_dir(dict(os.environ))
    assert modules_cache_dir() == modules_cache_dir(dict(os.environ))


def test_legacy_transformers_variables_in_their_order() -> None:
    assert legacy_transformers_cache({}) is None
    env = {"PYTORCH_PRETRAINED_BERT_CACHE": "/b", "TRANSFORMERS_CACHE": "/t"}
    assert legacy_transformers_cache(env) == ("TRANSFORMERS_CACHE", "/t")
    assert legacy_transformers_cache({"PYTORCH_TRANSFORMERS_CACHE": ""}) == (
        "PYTORCH_TRANSFORMERS_CACHE",
        "",
    )
