"""Encrypted backups: age archives, signed index and metadata, safe restore, retention.

Layer: judging rooms, the last of them (reads the files it backs up, writes
archives; the cipher is the ``age`` format through the ``age`` binary when
installed, else pyrage, never written here).

    keys.py       recipients (age1..., ssh-ed25519), identities, passphrases
    recipients.py who may decrypt a new backup; what opens one for check and restore
    errors.py     one refusal class per way a backup can be wrong
    index.py      the signed index: every file's path, type, mode, size, sha256
    meta.py       the signed clear metadata beside the archive
    pipe.py       a thread on a pipe, a hashing writer
    agechild.py   age (the binary, else pyrage) in a child process between two pipes
    create.py     ``ftmanifest backup create``
    unpack.py     the archive against its metadata, then decryption
    members.py    the tar stream member by member against the signed index
    restore.py    ``ftmanifest restore`` into a staging folder, then rename
    check.py      ``ftmanifest backup check``
    retention.py  restic-style keep rules (pure)
    prune.py      ``ftmanifest prune``
"""
