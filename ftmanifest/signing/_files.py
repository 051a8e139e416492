"""The caps of signing's untrusted files, and ssh's StrictModes check.

Layer: signing (reads files' metadata).  An envelope, a trust file or a key
comes from whoever could write to the repository: it is read through
``ftmanifest.untrusted.read_untrusted`` under the caps here.

StrictModes (sshd's ``auth_secure_path``): a trust file is used only if it and
every folder from it up to a stop folder are owned by the user or root and not
writable by group or others.  A sticky world-writable folder such as /tmp is
refused too, as ssh does: anyone may create entries there.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ftmanifest.signing.errors import InsecureTrustPathError

MiB = 1 << 20
ENVELOPE_MAX_BYTES = MiB
TRUST_MAX_BYTES = MiB
KEY_MAX_BYTES = 64 * 1024


def _insecure(path: Path, st: os.stat_result) -> str | None:
    """Why other users could change ``path``, or None."""
    uid = os.geteuid()
    if st.st_uid not in (0, uid):
        return f"owned by uid {st.st_uid}, not by you (uid {uid}) or root"
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        who = "group and others" if mode & 0o022 == 0o022 else "group" if mode & 0o020 else "others"
        return f"writable by {who} (mode {mode:04o})"
    return None


def check_strict_modes(trust_file: Path, stop: Path) -> None:
    """Refuse ``trust_file`` if it, or a folder from its folder up to ``stop``
    (inclusive), could be changed by another user; ``stop`` must be an ancestor."""
    if os.name == "nt":  # pragma: no cover - POSIX ownership and modes only
        return
    stop = Path(os.path.abspath(stop))
    chain = [Path(os.path.abspath(trust_file))]
    folder = chain[0].parent
    while True:
        chain.append(folder)
        if folder == stop or folder.parent == folder:
            break
        folder = folder.parent
    for item in chain:
        st = item.stat()  # follows links, like ssh's stat(): the target is what is read
        why = _insecure(item, st)
        if why is not None:
            kind = "trust file" if item == chain[0] else "folder on the trust file's path"
            raise InsecureTrustPathError(
                f"refusing the trust file: {kind} {item} is {why}",
                path=str(item),
                expected="owned by you or root and not writable by group or others "
                "(like ssh's StrictModes)",
                observed=why,
                hint=f"if this trust file is yours: chmod go-w {item}; otherwise someone "
                "else may have planted it -- pass --trust PATH or set FTMANIFEST_TRUST_FILE",
            )
