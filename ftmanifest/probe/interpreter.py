"""Probe: what a running Python interpreter has read and imported, seen from inside it.

Layer: probes and runtime, and deliberately standard library only: ``ftmanifest
run`` executes this file's source with the command's own interpreter (another
venv, another Python, no ftmanifest installed) and reads the JSON it prints::

    /other/venv/bin/python /path/to/interpreter.py      # or: python -c "$(cat interpreter.py)"

The in-process guard calls :func:`observe` directly.  What it records is what
decides which code runs: the executable and its prefixes, the flags and
``sys.path``, the site folders and every ``.pth`` file in them (with its sha256
and which of its lines are ``import`` lines, the ones ``site`` executes),
``sitecustomize``/``usercustomize``, every module in ``sys.modules`` with the file
its loader read and the bytecode cache it would have used, the distributions
(``*.dist-info``) on ``sys.path``, the start-up variables that change what code
runs (as the process was started, from ``/proc/self/environ``, and as they are
now), ``/etc/ld.so.preload`` and the shared objects mapped into the process.

Nothing here judges: ``ftmanifest.verify.interpreter`` does.  Reading a module's
attributes never goes through a module's ``__getattr__`` (transformers' lazy
modules import on attribute access): only ``__dict__`` is read.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import marshal
import os
import sys
import sysconfig

FORMAT = 1
# Variables read at start-up that change which code runs (Python's own, the
# dynamic loader's); the judge refuses the first group unless the manifest pins
# them.  The others are recorded for the reader: they change which bytecode
# file is read (judged by content anyway) or are harmless (safe-path, no-user-site).
STARTUP_VARIABLES = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "PYTHONPLATLIBDIR",
    "PYTHONEXECUTABLE",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "DYLD_INSERT_LIBRARIES",
    "DYLD_LIBRARY_PATH",
    "DYLD_FRAMEWORK_PATH",
    "DYLD_FALLBACK_LIBRARY_PATH",
)
RECORDED_VARIABLES = (
    "PYTHONSAFEPATH",
    "PYTHONNOUSERSITE",
    "PYTHONPYCACHEPREFIX",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONINSPECT",
    "PYTHONOPTIMIZE",
    "PYTHONWARNINGS",
    "PYTHONBREAKPOINT",
)
LD_SO_PRELOAD = "/etc/ld.so.preload"
_FLAGS = ("isolated", "no_site", "no_user_site", "ignore_environment", "dont_write_bytecode",
          "safe_path", "optimize")  # fmt: skip
_CHUNK = 1 << 20
_CUSTOMIZE = ("sitecustomize", "usercustomize")


def observe() -> dict:
    """Everything this interpreter shows about the code it runs, as JSON-ready data."""
    site = sys.modules.get("site")
    stdlib = _stdlib_folders()
    return {
        "format": FORMAT,
        "pid": os.getpid(),
        "executable": sys.executable,
        "executable_realpath": os.path.realpath(sys.executable) if sys.executable else "",
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "exec_prefix": sys.exec_prefix,
        "base_exec_prefix": getattr(sys, "base_exec_prefix", sys.exec_prefix),
        "venv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
        "version": sys.version,
        "version_info": list(sys.version_info[:3]),
        "implementation": sys.implementation.name,
        "cache_tag": sys.implementation.cache_tag,
        "magic": importlib.util.MAGIC_NUMBER.hex(),
        "check_hash_based_pycs": _check_hash_based_pycs(),
        "flags": {name: int(getattr(sys.flags, name, 0)) for name in _FLAGS},
        "path": list(sys.path),
        "cwd": _cwd(),
        "pycache_prefix": getattr(sys, "pycache_prefix", None),
        "stdlib": stdlib,
        "stdlib_module_names": sorted(getattr(sys, "stdlib_module_names", ())),
        "site": _site(site),
        "pth_files": _pth_files(_site_folders(site)),
        "customize": {n: _module_file(sys.modules.get(n)) for n in _CUSTOMIZE},
        "modules": _modules(),
        "distributions": _distributions(sys.path),
        "variables": _variables(),
        "ld_so_preload": _ld_so_preload(),
        "mapped": _mapped(),
    }


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:
        return None


def _check_hash_based_pycs() -> str:
    try:
        import _imp

        return str(_imp.check_hash_based_pycs)
    except (ImportError, AttributeError):
        return "default"


def _stdlib_folders() -> list[str]:
    """The standard library's folders (``stdlib``, ``platstdlib``, lib-dynload, the zip)."""
    base = getattr(sys, "base_prefix", sys.prefix)
    platbase = getattr(sys, "base_exec_prefix", sys.exec_prefix)
    # In a venv `platstdlib` is the venv's own lib/pythonX.Y (which holds its
    # site-packages): the base interpreter's folders, never the venv's.
    where = {"base": base, "installed_base": base, "platbase": platbase,
             "installed_platbase": platbase}  # fmt: skip
    out = []
    for key in ("stdlib", "platstdlib"):
        try:
            folder = sysconfig.get_path(key, vars=where)
        except KeyError:
            continue
        if folder:
            out += [folder, os.path.join(folder, "lib-dynload")]
    zipped = "python{}{}.zip".format(*sys.version_info[:2])
    out += [p for p in sys.path if os.path.basename(p) == zipped]
    return sorted(set(out))


def _site(site: object) -> dict:
    if site is None:
        return {"imported": False, "site_packages": [], "user_site": None,
                "enable_user_site": False}  # fmt: skip
    packages = getattr(site, "getsitepackages", None)
    user = getattr(site, "getusersitepackages", None)
    try:
        found = list(packages()) if packages is not None else []
    except Exception:  # noqa: BLE001 - an old virtualenv's site.py may not have it working
        found = []
    try:
        user_site = user() if user is not None else None
    except Exception:  # noqa: BLE001
        user_site = None
    return {
        "imported": True,
        "site_packages": found,
        "user_site": user_site,
        "enable_user_site": bool(getattr(site, "ENABLE_USER_SITE", False)),
    }


def _site_folders(site: object) -> list[str]:
    """Folders whose ``.pth`` files the interpreter may have run: the site folders and
    every folder on ``sys.path`` (``site.addsitedir`` puts the folder it processed
    there).  A ``.pth`` in a plain ``sys.path`` folder was not run, but listing it costs
    one directory read and judging it errs on the safe side."""
    info = _site(site)
    folders = list(info["site_packages"])
    if info["enable_user_site"] and info["user_site"]:
        folders.append(info["user_site"])
    folders += [p for p in sys.path if p]
    seen: dict[str, None] = {}
    for folder in folders:
        if os.path.isdir(folder):
            seen.setdefault(os.path.abspath(folder), None)
    return list(seen)


def _pth_files(folders: list[str]) -> list[dict]:
    out = []
    for folder in folders:
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".pth"))
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            entry: dict = {"path": path, "folder": folder}
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError as exc:
                entry["error"] = exc.strerror or str(exc)
                out.append(entry)
                continue
            entry["sha256"] = hashlib.sha256(data).hexdigest()
            # site.addpackage runs a line that starts with "import " or "import\t"
            entry["import_lines"] = [
                n for n, line in enumerate(data.splitlines(), 1)
                if line.startswith((b"import ", b"import\t"))
            ]  # fmt: skip
            out.append(entry)
    return out


def _namespace(module: object) -> dict:
    try:
        found = object.__getattribute__(module, "__dict__")
    except AttributeError:
        return {}
    return found if isinstance(found, dict) else {}


def _module_file(module: object) -> str | None:
    if module is None:
        return None
    row = _module_row("", module)
    return row.get("origin") or row.get("file")


def _module_row(name: str, module: object) -> dict:
    space = _namespace(module)
    spec = space.get("__spec__")
    row: dict = {"name": name}
    loader = getattr(spec, "loader", None) if spec is not None else space.get("__loader__")
    if loader is not None:
        kind = loader if isinstance(loader, type) else type(loader)
        row["loader"] = f"{kind.__module__}.{kind.__qualname__}"
    if spec is not None and getattr(spec, "name", name) != name:
        row["spec_name"] = spec.name  # __main__ of `python -m pkg.mod`: pkg.mod
    if spec is not None and getattr(spec, "has_location", False):
        row["origin"] = spec.origin
        if getattr(spec, "cached", None):
            row["cached"] = spec.cached
    elif spec is not None and spec.origin in ("built-in", "frozen"):
        row["origin"] = spec.origin
    file = space.get("__file__")
    if isinstance(file, str):
        row["file"] = file
    cached = space.get("__cached__")
    if isinstance(cached, str) and "cached" not in row:
        row["cached"] = cached
    source_loader = row.get("loader", "").endswith(".SourceFileLoader")
    if source_loader and row.get("cached") and row.get("origin"):
        row["pyc"] = pyc_state(row["origin"], row["cached"])
    return row


def _modules() -> list[dict]:
    return [
        _module_row(name, module)
        for name, module in sorted(sys.modules.copy().items())
        if module is not None and isinstance(name, str)
    ]


def pyc_state(source: str, cached: str) -> dict:
    """Would ``SourceFileLoader`` use the bytecode in ``cached`` for ``source`` now?

    ``used``: the header matches what the loader checks (the magic number; the
    source's mtime and size for a timestamp pyc, its hash for a checked hash-based
    one, nothing for an unchecked one), so the interpreter runs that file's code
    and never reads the source.  ``stale``: the loader would compile the source.
    ``absent``: no such file.
    """
    state: dict = {"path": cached}
    try:
        with open(cached, "rb") as fh:
            head = fh.read(16)
    except FileNotFoundError:
        return {**state, "state": "absent"}
    except OSError as exc:
        return {**state, "state": "unreadable", "why": exc.strerror or str(exc)}
    if len(head) < 16 or head[:4] != importlib.util.MAGIC_NUMBER:
        return {**state, "state": "stale", "why": "another magic number"}
    flags = int.from_bytes(head[4:8], "little")
    if flags & ~0b11:
        return {**state, "state": "stale", "why": "invalid flags"}
    try:
        st = os.stat(source)
    except OSError:
        return {**state, "state": "stale", "why": "no source"}
    if flags & 0b1:
        mode = _check_hash_based_pycs()
        checked = mode != "never" and (flags & 0b10 or mode == "always")
        if not checked:
            return {**state, "state": "used", "kind": "unchecked-hash"}
        try:
            with open(source, "rb") as fh:
                same = importlib.util.source_hash(fh.read()) == head[8:16]
        except OSError:
            return {**state, "state": "stale", "why": "source unreadable"}
        return {**state, "state": "used" if same else "stale", "kind": "checked-hash"}
    mtime = int.from_bytes(head[8:12], "little")
    size = int.from_bytes(head[12:16], "little")
    fresh = mtime == int(st.st_mtime) & 0xFFFFFFFF and size == st.st_size & 0xFFFFFFFF
    return {**state, "state": "used" if fresh else "stale", "kind": "timestamp"}


def compiled_matches(
    source: str, cached: str, optimize: int = -1, source_bytes: bytes | None = None
) -> bool:
    """Is the code in the pyc ``cached`` what this interpreter compiles from ``source``?

    The loader compiles with ``compile(source_bytes, path, "exec",
    dont_inherit=True, optimize=-1)`` and writes ``marshal.dumps(code)`` after a
    16-byte header; the same bytes again mean the same code.  marshal marks objects
    referenced more than once, which depends on what else the writing process held
    (interned strings), so equal code can marshal to other bytes: then the code
    objects are compared (``code.__eq__``: bytecode, constants and nested code,
    names, line table; not the file name, which the loader rewrites on import).
    Only the interpreter that imports the module can answer: another version
    compiles other bytecode.  ``source_bytes``: the source as already read and
    verified (else it is read from ``source``).  Raises ``OSError`` when a file
    cannot be read, ``SyntaxError`` when the source does not compile.
    """
    if source_bytes is None:
        with open(source, "rb") as fh:
            source_bytes = fh.read()
    code = compile(source_bytes, source, "exec", dont_inherit=True, optimize=optimize)
    with open(cached, "rb") as fh:
        body = fh.read()[16:]
    if marshal.dumps(code) == body:
        return True
    try:
        return bool(marshal.loads(body) == code)
    except (EOFError, ValueError, TypeError):
        return False


def _distributions(path: list[str]) -> list[dict]:
    out = []
    seen = set()
    for folder in path:
        try:
            names = sorted(n for n in os.listdir(folder or ".") if n.endswith(".dist-info"))
        except OSError:
            continue
        for name in names:
            info = os.path.join(os.path.abspath(folder or "."), name)
            if info in seen:
                continue
            seen.add(info)
            out.append(_distribution(info))
    return out


def _distribution(info: str) -> dict:
    meta = _read_text(os.path.join(info, "METADATA")) or ""
    fields: dict = {}
    for line in meta.splitlines():
        if not line.strip():
            break  # the headers end at the first empty line
        key, sep, value = line.partition(":")
        if sep and key in ("Name", "Version") and key not in fields:
            fields[key] = value.strip()
    record = os.path.join(info, "RECORD")
    direct = _read_text(os.path.join(info, "direct_url.json"))
    try:
        direct_url = json.loads(direct) if direct else None
    except ValueError:
        direct_url = {"unreadable": direct[:200] if direct else ""}
    return {
        "path": info,
        "folder": os.path.dirname(info),
        "name": fields.get("Name"),
        "version": fields.get("Version"),
        "record": record if os.path.isfile(record) else None,
        "direct_url": direct_url,
        "installer": (_read_text(os.path.join(info, "INSTALLER")) or "").strip() or None,
    }


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(_CHUNK)
    except OSError:
        return None


def _variables() -> dict:
    """The watched variables as the process started (``/proc/self/environ``, which a
    later ``os.environ`` change or ``unsetenv`` does not rewrite) and as they are now."""
    names = STARTUP_VARIABLES + RECORDED_VARIABLES
    startup = None
    try:
        with open("/proc/self/environ", "rb") as fh:
            raw = fh.read()
        startup = {}
        for item in raw.split(b"\0"):
            key, sep, value = item.partition(b"=")
            name = key.decode("utf-8", "replace")
            if sep and name in names:
                startup[name] = value.decode("utf-8", "surrogateescape")
    except OSError:
        pass
    now = {name: os.environ[name] for name in names if name in os.environ}
    return {"startup": startup, "now": now}


def _ld_so_preload() -> dict:
    text = _read_text(LD_SO_PRELOAD)
    libraries = []
    for line in (text or "").splitlines():
        line = line.split("#", 1)[0]
        libraries += line.replace(":", " ").split()
    return {"path": LD_SO_PRELOAD, "exists": text is not None, "libraries": libraries}


def _mapped() -> list[str] | None:
    """Files mapped executable into this process (shared objects), Linux only."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="surrogateescape") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    found: dict[str, None] = {}
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) == 6 and "x" in parts[1] and parts[5].startswith("/"):
            found.setdefault(parts[5], None)
    return sorted(found)


def compare_bytecode(items: list[dict], optimize: int) -> dict[str, str]:
    """Of ``items`` ({"source", "pyc", "digest": "sha256:<hex>" of the source as
    verified}), the pycs that are not the compilation of that source: pyc -> why."""
    bad: dict[str, str] = {}
    for item in items:
        source, pyc = str(item["source"]), str(item["pyc"])
        try:
            with open(source, "rb") as fh:
                data = fh.read()
            if "sha256:" + hashlib.sha256(data).hexdigest() != item["digest"]:
                bad[pyc] = "not judged: its source changed while it was verified"
            elif not compiled_matches(source, pyc, optimize, source_bytes=data):
                bad[pyc] = "other code than the source compiles to"
        except (OSError, SyntaxError, ValueError) as exc:
            bad[pyc] = f"unreadable: {getattr(exc, 'strerror', None) or exc}"
    return bad


def main(argv: list[str]) -> int:
    """Print the observation as JSON; with ``--compare OPTIMIZE``, read a JSON list of
    bytecode items on stdin and print :func:`compare_bytecode`'s answer instead (the
    judge spreads a first, long comparison over processes of the same interpreter)."""
    if argv[:1] == ["--compare"]:
        out = compare_bytecode(json.load(sys.stdin), int(argv[1]))
    else:
        out = observe()
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
