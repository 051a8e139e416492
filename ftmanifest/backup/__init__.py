"""Encrypted backups: age archives, signed index and metadata, safe restore, retention.

Layer: edge (reads the files it backs up, writes archives; the cipher is the
``age`` format through pyrage, never written here).

    keys.py       recipients (age1..., ssh-ed25519), identities, passphrases
    errors.py     one refusal class per way a backup can be wrong
    layout.py     names of a backup's files and the archive's members
    index.py      the signed index: every file's path, type, mode, size, sha256
    meta.py       the signed clear metadata beside the archive
    pipe.py       threads and pipes joining tar and age in constant memory
    create.py     ``ftmanifest backup``
    unpack.py     reading an archive member by member against its index
    restore.py    ``ftmanifest restore`` into a staging folder, then rename
    check.py      ``ftmanifest backup check``
    retention.py  restic-style keep rules (pure)
    prune.py      ``ftmanifest prune``
"""
