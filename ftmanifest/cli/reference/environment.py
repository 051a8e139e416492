"""Reference pages for what ftmanifest reads from its surroundings and leaves
behind: environment variables, files and folders, and the formats it promises
to keep reading.

Layer: commands - edge (part of the generated reference).  The tables below are the
source of the pages ``environment.md``, ``files.md`` and ``compatibility.md``;
``tests/docs_test.py`` fails when a variable named ``FTMANIFEST_*`` in the
package is missing from ``ENVIRONMENT`` (or listed there but read nowhere), and
when a format constant of the code differs from what ``FORMATS`` says.
"""

from __future__ import annotations

from typing import NamedTuple

from ftmanifest.cli.reference.markdown import GENERATED, escape


class Variable(NamedTuple):
    name: str
    used_by: str
    meaning: str
    default: str


class Place(NamedTuple):
    path: str
    written_by: str
    holds: str
    safe_to_remove: str


class Format(NamedTuple):
    name: str
    identifier: str  # what the file says of itself; checked against the code
    source: str  # "module:CONSTANT" the identifier is read from
    promise: str


ENVIRONMENT: tuple[Variable, ...] = (
    Variable(
        "FTMANIFEST_TRUST_FILE",
        "every verifier (`verify`, `run`, the guard, `check-adapter`, `backup`, `ledger check`)",
        "the trust file (allowed signers) to judge signatures with, when `--trust` is not given; "
        "CI sets it to a file outside the checkout that a pull request cannot change",
        "`.ftmanifest/allowed_signers` at the root of the manifest's git work tree",
    ),
    Variable(
        "FTMANIFEST_LEDGER",
        "`run`, the guard, `preflight`, `ledger`",
        "the ledger folder (attempts and run records)",
        "`.ftmanifest/ledger` at the root of the current git work tree",
    ),
    Variable(
        "FTMANIFEST_LEDGER_KEY",
        "`run`, the guard, `preflight`, `ledger check`",
        "the private key that signs ledger records; unsigned records are weaker evidence",
        "unset: records are written unsigned",
    ),
    Variable(
        "FTMANIFEST_CACHE_DIR",
        "`lock`, `verify`, `scan`, `data check`, the guard",
        "the cache folder (file digests by stat, scan results, dataset digests); "
        "trust never comes from it: an entry is used only when the file's stat is unchanged",
        "`$XDG_CACHE_HOME/ftmanifest`, else `~/.cache/ftmanifest`",
    ),
    Variable(
        "FTMANIFEST_MANIFEST",
        "set by `run` for its command; read by the guard",
        "the manifest `run` verified, so the training process judges the same file",
        "set by `run`",
    ),
    Variable(
        "FTMANIFEST_DIGEST",
        "set by `run` for its command; read by the guard",
        "the digest of the manifest `run` verified; the guard refuses another",
        "set by `run`",
    ),
    Variable(
        "FTMANIFEST_ATTEMPT",
        "set by `run` for its command; read by the guard",
        "the ledger attempt the guard's run records join",
        "set by `run`",
    ),
    Variable(
        "FTMANIFEST_GUARD_REPORTS",
        "set by `run` for its command; read by the guard",
        "a private folder where each rank's guard writes its report for `run` to collect",
        "unset: no report file",
    ),
    Variable(
        "FTMANIFEST_GRACE",
        "`run`",
        "seconds the command's process group gets after SIGTERM before SIGKILL "
        "(`--grace` overrides it)",
        "30",
    ),
    Variable(
        "FTMANIFEST_PHONE_REGIONS",
        "`scan`, `data check`, the handoff report",
        "the phone-number regions the personal-data scan knows (`US,GB`); "
        "`--phone-regions` overrides it",
        "US,GB,DE,FR,ES,IT,NL,AU,IN,BR",
    ),
    Variable(
        "FTMANIFEST_SCAN_ENGINE",
        "`scan`, `data check`",
        "the text-scan engine: `auto`, `hyperscan` or `re` (same findings, different speed); "
        "an unknown value is a usage error (exit 2)",
        "auto: hyperscan when installed",
    ),
    Variable(
        "FTMANIFEST_PROGRESS_DELAY",
        "every command that shows progress",
        "seconds of work before a progress bar appears on a terminal",
        "1",
    ),
    Variable(
        "FTMANIFEST_PASSPHRASE",
        "`sign`, `bind`, `keygen` (named by `--passphrase-env`)",
        "the usual name for the variable holding a key's passphrase; ftmanifest reads the "
        "variable `--passphrase-env` names, never this one by itself",
        "none",
    ),
    Variable(
        "FTMANIFEST_DEBUG",
        "every command",
        "`1` shows the traceback of an internal error (exit 3)",
        "unset",
    ),
    Variable(
        "FTMANIFEST_TESTING",
        "the package probe (tests only)",
        "with `FTMANIFEST_TEST_PACKAGE_VERSIONS`, lets a test make one process look as if "
        "it had other package versions; such a process can only look drifted, never clean, "
        "and every verify prints a warning",
        "unset",
    ),
    Variable(
        "FTMANIFEST_TEST_PACKAGE_VERSIONS",
        "the package probe (tests only)",
        "`name=version,...` forced while `FTMANIFEST_TESTING=1` (see above)",
        "unset",
    ),
)
"""Every ``FTMANIFEST_*`` variable the package reads or sets."""

OBSERVED: tuple[Variable, ...] = (
    Variable(
        "HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE, HF_MODULES_CACHE, TRANSFORMERS_CACHE",
        "`verify`, `run`, the guard",
        "judged, not obeyed: the caches the training process will read are the ones verified; "
        "a process whose imported huggingface_hub reads another cache is refused",
        "-",
    ),
    Variable(
        "PYTHONPATH, PYTHONHOME, PYTHONSAFEPATH, PYTHONSTARTUP, PYTHONHASHSEED and the "
        "interpreter's other start-up variables",
        "`verify`, `run`, the guard",
        "judged: they change what the interpreter imports or how it hashes",
        "-",
    ),
    Variable(
        "CUBLAS_WORKSPACE_CONFIG",
        "`run`, the guard",
        "set for deterministic cuBLAS when the manifest asks for determinism",
        "-",
    ),
    Variable(
        "XDG_CACHE_HOME", "every cache user", "the base of the default cache folder", "`~/.cache`"
    ),
    Variable("COLUMNS, TERM", "every command", "the width and kind of the terminal output", "-"),
)
"""Variables of other tools that ftmanifest reads, judges or sets."""

PLACES: tuple[Place, ...] = (
    Place(
        "~/.ftmanifest/id_ed25519, id_ed25519.pub",
        "`keygen` (the default key)",
        "your signing key pair; the private key is written 0600",
        "no: it signs your manifests",
    ),
    Place(
        ".ftmanifest/allowed_signers",
        "`trust add`",
        "the repository's trust file: who may sign its manifests",
        "no: commit it",
    ),
    Place(
        ".ftmanifest/ledger/",
        "`run`, the guard, `preflight`",
        "one signed JSON record per attempt and run, append-only",
        "`prune` removes what retention allows",
    ),
    Place(
        "MANIFEST.sig.json (beside the manifest)",
        "`sign`",
        "the DSSE envelope(s) signing the manifest",
        "no: verify needs it",
    ),
    Place(
        "ADAPTER/ftmanifest-binding.sig.json, ADAPTER/model.sig",
        "`bind`, the guard at save time",
        "the adapter's binding to its base model and manifest (and a model-signing bundle)",
        "no: check-adapter and load_bound need it",
    ),
    Place(
        "$FTMANIFEST_CACHE_DIR/statcache-v1.sqlite3",
        "`lock`, `verify`, `scan`, the guard",
        "file digests keyed by path and stat",
        "yes: costs speed only",
    ),
    Place(
        "$FTMANIFEST_CACHE_DIR/ (scan results, names findings)",
        "`scan`, the guard",
        "findings by file digest and scanner version",
        "yes: costs speed only",
    ),
    Place(
        "$FTMANIFEST_CACHE_DIR/datasets/",
        "the guard's `datasets` tracing",
        "digests of pinned datasets' cache files",
        "yes: costs speed only",
    ),
    Place(
        "BACKUPS/",
        "`backup create`",
        "age-encrypted archives with signed metadata and index",
        "with `prune --apply` only",
    ),
    Place(
        "report OUT/ (audit.html, handoff.md, README.md)",
        "`report`",
        "the hand-off: report, model card; no machine paths",
        "yes: `report` writes it again",
    ),
)
"""What ftmanifest writes, and where.  Every write is a temp file, fsync, rename."""

FORMATS: tuple[Format, ...] = (
    Format(
        "manifest",
        "ftmanifest: 1",
        "ftmanifest.manifest:FORMAT_VERSION",
        "read by every later release; a manifest naming a newer format is refused with "
        "the release to install",
    ),
    Format(
        "manifest signature (DSSE)",
        "https://ftmanifest.dev/experiment/v1",
        "ftmanifest.signing.statement:PREDICATE_TYPE",
        "an in-toto v1 statement in a DSSE envelope; verified by any later release and by "
        "in-toto / securesystemslib / PyNaCl",
    ),
    Format(
        "adapter binding",
        "https://ftmanifest.dev/adapter-binding/v1",
        "ftmanifest.adapter.binding:PREDICATE_TYPE",
        "later releases check older bindings as far as they go and warn to bind again",
    ),
    Format(
        "ledger record",
        "https://ftmanifest.dev/ledger-record/v1",
        "ftmanifest.ledger.recordfile:PREDICATE",
        "append-only; records stay readable by every later release",
    ),
    Format(
        "run record",
        "1",
        "ftmanifest.ledger.runrecord:RECORD_FORMAT",
        "fields are only added; a reader ignores none it needs",
    ),
    Format(
        "backup metadata",
        "https://ftmanifest.dev/backup/v1",
        "ftmanifest.backup.meta:PREDICATE_TYPE",
        "every backup restores with every later release",
    ),
    Format(
        "backup index",
        "https://ftmanifest.dev/backup-index/v1",
        "ftmanifest.backup.index:PREDICATE_TYPE",
        "as the backup metadata",
    ),
    Format(
        "results file",
        "ftmanifest-results 1",
        "ftmanifest.results.resultsfile:VERSION",
        "read by every later release",
    ),
    Format(
        "scan baseline",
        "2",
        "ftmanifest.scan.baseline:VERSION",
        "version 1 (one entry per rule and import) is refused with the command to write a new one: "
        "it accepted an import everywhere",
    ),
)
"""The formats ftmanifest writes and the promise it makes about reading them later."""


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(escape(cell, table=True) for cell in row) + " |" for row in rows]
    return lines


def environment_page() -> str:
    return "\n".join(
        [
            GENERATED,
            "",
            "# Environment variables",
            "",
            "The variables ftmanifest reads or sets. An option given on the command line always",
            "wins over its variable.",
            "",
            *_table(("variable", "used by", "meaning", "default"), [tuple(v) for v in ENVIRONMENT]),
            "",
            "## Variables of other tools",
            "",
            "ftmanifest judges these as part of what the training process will use; it does not",
            "take its own settings from them.",
            "",
            *_table(
                ("variable", "used by", "what ftmanifest does with it", "default"),
                [tuple(v) for v in OBSERVED],
            ),
            "",
        ]
    )


def files_page() -> str:
    return "\n".join(
        [
            GENERATED,
            "",
            "# Files and folders ftmanifest writes",
            "",
            "Every file is written whole: a temporary file beside it, flushed to disk, then",
            "renamed over the old one, so a crash leaves the old file or the new one, never half.",
            "Private keys are written 0600.",
            "",
            *_table(("where", "written by", "holds", "safe to remove"), [tuple(p) for p in PLACES]),
            "",
        ]
    )


def compatibility_page() -> str:
    return "\n".join(
        [
            GENERATED,
            "",
            "# Compatibility across versions",
            "",
            "Each format names itself in its files. A release reads every format below that an",
            "earlier release wrote, except where the promise says otherwise; a file naming a",
            "format this release does not know is refused with a reason code, never guessed at.",
            "",
            *_table(
                ("format", "identifier", "promise"),
                [(f.name, f.identifier, f.promise) for f in FORMATS],
            ),
            "",
        ]
    )
