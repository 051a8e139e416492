"""Judge the interpreter that trains: every file and variable that decides which code it runs.

Layer: judging rooms (verify).  Input: an observation made inside the
interpreter (``ftmanifest.probe.interpreter.observe``), the manifest, and the
files it names; output: drift rows.  Files are hashed through the stat cache
(``hashing.hash_files``), so an unchanged environment re-checks with a
``stat`` a file.

Each file an imported module was loaded from is judged by the first rule that
applies (``Places.place``):

1. listed in the RECORD of a distribution on ``sys.path``: its sha256 must be
   the listed one (an installed file edited with the version unchanged);
2. inside the training repository, when the manifest pins its commit: its
   bytes must be the pinned commit's blob; a path the commit does not have
   (untracked or ignored) is refused;
3. inside a folder that holds distributions (site-packages) but listed by no
   RECORD: refused, unless ``environment.interpreter.allow_paths`` allows it;
4. inside the project folder of ftmanifest's own editable install (the
   guard's own code, which judges everything else: trusted as the guard is,
   one warning says so);
5. the standard library of ``sys.base_prefix`` (its folders, not their
   site-packages, and a module name of ``sys.stdlib_module_names``): accepted
   unhashed, it has no RECORD (docs/limits.md);
6. under a path the manifest allows (``environment.interpreter.allow_paths``);
7. anything else: refused.

A module that ran from bytecode must be the compilation of its verified
source (``verify.bytecode``).  Every ``.pth`` file of a site folder must be
listed, with its hash, in a RECORD (or allowed); ``sitecustomize`` and
``usercustomize`` must come from a RECORD-judged or pinned-repository file (or
an allowed one).  An editable install of a pinned package is refused unless
its project is the training repository (or inside it).  The start-up
variables (``PYTHONPATH``, ``LD_PRELOAD``...) set when the process started or
now must be pinned with that value in ``environment.env_vars``.  Shared objects
mapped from a distribution's folder are judged against its RECORD, and
``/etc/ld.so.preload`` may only name allowed libraries.

Rows from here are not accepted with ``accept=``: what they would wave
through is code, and the manifest says which code on purpose (a pinned
variable, an allowed path), under its signature.
"""

from __future__ import annotations

import importlib.util
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ftmanifest.findings import Finding
from ftmanifest.hashing.digests import ALGORITHM, FileDigest
from ftmanifest.hashing.files import hash_files
from ftmanifest.manifest.model import Manifest
from ftmanifest.manifest.patterns import normalize_name
from ftmanifest.probe.interpreter import STARTUP_VARIABLES, observe
from ftmanifest.probe.records import distributions, forget_paths, real_path, record_index
from ftmanifest.statcache import StatCache, StatKey
from ftmanifest.verify import _interpreter_rows as rows
from ftmanifest.verify._interpreter_places import Places, Where, build_places
from ftmanifest.verify._pinned_code import ignored, worktree_blob
from ftmanifest.verify.bytecode import Compiled, mismatched

__all__ = ["InterpreterVerdict", "judge_interpreter", "observe_and_judge"]


@dataclass
class InterpreterVerdict:
    """The rows, warnings, and how many files each rule accepted."""

    rows: list[Finding]
    warnings: list[str] = field(default_factory=list)
    judged: dict[str, int] = field(default_factory=dict)
    interpreter: dict[str, Any] = field(default_factory=dict)
    """The executable, its prefixes and version (for the run record)."""


def observe_and_judge(
    manifest: Manifest,
    manifest_path: Path,
    *,
    code_dir: Path | None = None,
    use_cache: bool = True,
) -> InterpreterVerdict:
    """Observe this interpreter and judge it (the in-process guard's call)."""
    return judge_interpreter(
        observe(), manifest, manifest_path, code_dir=code_dir, use_cache=use_cache
    )


def judge_interpreter(
    observation: Mapping[str, Any],
    manifest: Manifest,
    manifest_path: Path,
    *,
    code_dir: Path | None = None,
    use_cache: bool = True,
    same_process: bool = True,
) -> InterpreterVerdict:
    """Every drift row of ``observation`` against ``manifest`` (module doc).

    ``same_process``: the observation is of this interpreter, so its bytecode
    can be compiled here to be compared; otherwise bytecode is judged only
    when the observed interpreter compiles as this one does (same magic number).
    """
    forget_paths()
    dists = distributions(observation.get("distributions") or [])
    places = build_places(observation, manifest, manifest_path, dists, code_dir=code_dir)
    cache = StatCache() if use_cache else None
    try:
        judge = _Judge(observation, manifest, places, cache)
        judge.run(same_process or _compiles_here(observation))
    finally:
        if cache is not None:
            cache.close()
    verdict = InterpreterVerdict(judge.rows, judge.warnings, judge.judged)
    shown = ("executable", "executable_realpath", "prefix", "base_prefix", "version", "venv")
    verdict.interpreter = {key: observation.get(key) for key in shown}
    return verdict


def _compiles_here(observation: Mapping[str, Any]) -> bool:
    return observation.get("magic") == importlib.util.MAGIC_NUMBER.hex()


class _Judge:
    """One judgement: collects the files to hash, then the rows."""

    def __init__(
        self,
        observation: Mapping[str, Any],
        manifest: Manifest,
        places: Places,
        cache: StatCache | None,
    ) -> None:
        self.obs = observation
        self.manifest = manifest
        self.places = places
        self.cache = cache
        self.rows: list[Finding] = []
        self.warnings: list[str] = []
        self.judged: dict[str, int] = {}
        self.digests: dict[str, FileDigest | Exception] = {}

    def run(self, bytecode: bool) -> None:
        modules = _module_files(self.obs.get("modules") or [])
        customize = {
            real_path(f): name for name, f in (self.obs.get("customize") or {}).items() if f
        }
        mapped = [real_path(p) for p in self.obs.get("mapped") or [] if os.path.isfile(p)]
        pth = [real_path(str(e["path"])) for e in self.obs.get("pth_files") or []]
        wanted = [*modules, *mapped, *pth]
        self.places.records = record_index(self.places.dists, wanted, self.cache)
        placed = {path: self.places.place(path) for path in [*modules, *mapped]}
        self._hash([p for p, where in placed.items() if where.rule == "record"])
        accepted: set[str] = set()  # sources whose bytecode is judged next
        for path, names in modules.items():
            where = placed[path]
            if path in customize:
                ok = self._customize(customize[path], path, where)
            else:
                ok = self._module(path, names, where)
            if ok:
                accepted.add(path)
        for path in mapped:
            if path not in modules and placed[path].rule in ("record", "repo", "unrecorded"):
                self._module(path, ["(shared object mapped into the process)"], placed[path])
        self._bytecode(accepted, bytecode)
        self._pth_files()
        self._editables()
        self._variables()
        self._preload()
        self._executable()
        self.rows = rows.capped(self.rows)

    def _hash(self, paths: list[str]) -> None:
        """sha256 of ``paths`` into ``digests``: from the stat cache when their stat is
        unchanged (a ``stat`` and a lookup each, no ``Path`` built), else read."""
        todo = [p for p in paths if p not in self.digests]
        if self.cache is not None and todo:
            stats = {}
            for path in todo:
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    stats[path] = st
            keyed = [(p, StatKey.of(st)) for p, st in stats.items()]
            known = self.cache.lookup_many(keyed, ALGORITHM)
            for path, digest in known.items():
                self.digests[path] = FileDigest(digest, stats[path].st_size)
            todo = [p for p in todo if p not in known]
        if todo:
            got = hash_files(todo, cache=self.cache, use_cache=self.cache is not None)
            self.digests.update({os.fspath(p): d for p, d in got.items()})

    def _count(self, rule: str) -> None:
        self.judged[rule] = self.judged.get(rule, 0) + 1

    def _module(self, path: str, names: list[str], where: Where) -> bool:
        """Judge one module file by its rule; True when it passes."""
        rule = where.rule
        if where.recorded is not None:  # rule "record"
            row = rows.recorded_file(
                path, names, where.recorded, self.digests.get(path), self.manifest
            )
        elif where.rel is not None:  # rule "repo"
            row = self._repo_file(path, names, where.rel)
        elif rule == "unrecorded":
            row = rows.unrecorded(path, names, where.folder)
        elif rule == "stdlib" and not self._stdlib_names(names):
            words = "in the standard library's folder, but no standard library module has its name"
            row = rows.unjudged(path, names, words)
        elif rule == "outside":
            row = rows.unjudged(path, names, self.places.outside_words(path))
        else:
            row = None
            if rule == "guard":
                self.places.guard_used = True
        if row is None:
            self._count(rule)
        else:
            self.rows.append(row)
        return row is None

    def _stdlib_names(self, names: list[str]) -> bool:
        known = self.places.stdlib_names
        tops = [n.split(".")[0] for n in names]
        # sysconfig's build data is named by platform and left out of the list
        return not known or any(t in known or t.startswith("_sysconfigdata_") for t in tops)

    def _repo_file(self, path: str, names: list[str], rel: str) -> Finding | None:
        tree = self.places.tree
        assert tree is not None
        entry = tree.entries.get(rel)
        if entry is None:
            inner = self.places.subtree(rel)
            if isinstance(inner, str):
                return rows.unjudged(path, names, f"in a submodule git cannot list: {inner}")
            if inner is not None:
                tree, rel = inner
                entry = tree.entries.get(rel)
        if entry is None:
            words = "ignored" if rel in ignored(tree.root, [rel]) else "untracked"
            return rows.not_in_commit(path, names, rel, tree.commit, words)
        oid = worktree_blob(tree, rel, self.cache)
        if oid == entry.blob:
            return None
        return rows.repo_changed(path, names, rel, tree.commit, entry.blob, oid)

    def _customize(self, name: str, path: str, where: Where) -> bool:
        """``sitecustomize``/``usercustomize`` run at every start: only a file judged by
        its RECORD or the pinned commit, or an allowed one, may hold them."""
        if where.recorded is not None:
            digest = self.digests.get(path)
            ok = rows.recorded_file(path, [name], where.recorded, digest, self.manifest) is None
        elif where.rel is not None:
            ok = self._repo_file(path, [name], where.rel) is None
        else:
            ok = self.places.allowed(path)
        if ok:
            self._count(where.rule)
        else:
            self.rows.append(rows.customize(name, path, self.places.outside_words(path)))
        return ok

    def _bytecode(self, accepted: set[str], here: bool) -> None:
        used = []
        for module in self.obs.get("modules") or []:
            pyc, origin = module.get("pyc") or {}, module.get("origin")
            if pyc.get("state") == "used" and origin and real_path(origin) in accepted:
                used.append((real_path(origin), str(pyc["path"])))
        if not used:
            return
        if not here:
            self.warnings.append(
                f"bytecode of {len(used)} module(s) not compared: the observed interpreter "
                "compiles for another Python than this one"
            )
            return
        self._hash([src for src, _pyc in used])
        items = []
        for src, pyc in used:
            digest = self.digests.get(src)
            if isinstance(digest, FileDigest):
                items.append(Compiled(src, pyc, digest.digest))
        for pyc, why in sorted(mismatched(items, self.cache).items()):
            src = next(s for s, p in used if p == pyc)
            self.rows.append(rows.bytecode(pyc, src, why, self.places.place(src), self.manifest))

    def _pth_files(self) -> None:
        site = self.places.site_folders
        for entry in self.obs.get("pth_files") or []:
            path = real_path(str(entry["path"]))
            in_site = real_path(str(entry.get("folder") or os.path.dirname(path))) in site
            if not in_site and not entry.get("import_lines"):
                continue  # a path-only .pth outside a site folder is never read
            where = self.places.place(path)
            problem = rows.pth_problem(entry, where)
            if problem is not None and not self.places.allowed(path):
                self.rows.append(rows.pth(path, entry, problem))

    def _editables(self) -> None:
        pinned = {normalize_name(n) for n in self.manifest.environment.packages}
        for dist in self.places.dists:
            if dist.editable is None or normalize_name(dist.name) not in pinned:
                continue
            if self.places.in_repo(real_path(dist.editable)):
                continue
            if self.places.guard_project and real_path(dist.editable) == self.places.guard_project:
                self.places.guard_used = True  # the warning below says so
                continue
            self.rows.append(rows.editable(dist, self.manifest))

    def _variables(self) -> None:
        seen = self.obs.get("variables") or {}
        pinned = self.manifest.environment.env_vars
        for name in STARTUP_VARIABLES:
            for when in ("startup", "now"):
                values = seen.get(when)
                if not isinstance(values, dict) or name not in values:
                    continue
                value = str(values[name])
                if pinned.get(name) != value:
                    self.rows.append(rows.variable(name, value, when, pinned.get(name)))
                    break

    def _preload(self) -> None:
        info = self.obs.get("ld_so_preload") or {}
        libs = [lib for lib in info.get("libraries") or [] if not self.places.allowed(lib)]
        if libs:
            self.rows.append(rows.preload_file(str(info.get("path")), libs))

    def _executable(self) -> None:
        exe = str(self.obs.get("executable_realpath") or "")
        homes = {
            real_path(str(self.obs.get(k) or "/")) for k in ("base_prefix", "base_exec_prefix")
        }
        if exe and not any(exe.startswith(h.rstrip("/") + "/") for h in homes):
            self.rows.append(rows.foreign_executable(exe, sorted(homes)))
        if self.places.guard_used:
            self.warnings.append(
                f"ftmanifest itself is an editable install of {self.places.guard_project}: "
                "that project's files are the guard's own code, trusted as the guard is "
                "and not judged"
            )


def _module_files(modules: list[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Each file a module was loaded from (built-in, frozen and file-less modules have
    none) -> the module names that use it."""
    out: dict[str, list[str]] = {}
    for module in modules:
        origin = module.get("origin")
        if origin in ("built-in", "frozen"):
            continue
        path = origin if isinstance(origin, str) else None
        if path is None:
            file = module.get("file")
            # __main__ of a script has only __file__; torch's op namespaces carry
            # a relative placeholder, which names no file
            path = file if isinstance(file, str) and os.path.isabs(file) else None
        if path is None:
            continue
        name = module.get("spec_name") or module.get("name")
        out.setdefault(real_path(path), []).append(str(name))
    return out
