"""One refusal class per way a backup can be wrong.

Layer: judging rooms - errors.  Each class has its own ``reason`` code so scripts (and
the tests) tell a flipped byte from a wrong key from a planted member.  All are refusals
(exit 1) except unusable input (exit 2).
"""

from __future__ import annotations

from ftmanifest.errors import InputError, RefusedError


class BackupRefusedError(RefusedError):
    """Root of every backup refusal: a backup that does not verify."""

    reason = "backup-refused"


class ArchiveDigestError(BackupRefusedError):
    """The encrypted file is not the one the signed metadata names."""

    reason = "archive-digest-mismatch"


class DecryptFailedError(BackupRefusedError):
    """age refused the ciphertext: altered, truncated, reordered chunks."""

    reason = "decrypt-failed"


class WrongIdentityError(BackupRefusedError):
    """None of the given identities is a recipient of the backup."""

    reason = "wrong-identity"


class WrongPassphraseError(BackupRefusedError):
    """The passphrase does not open a passphrase-encrypted identity (``<id>.key.age``)."""

    reason = "wrong-passphrase"


class MetadataMismatchError(BackupRefusedError):
    """The metadata is another backup's, or names other files."""

    reason = "metadata-mismatch"


class MemberRefusedError(BackupRefusedError):
    """An archive member that restore must never write."""

    reason = "member-refused"


class IndexMismatchError(BackupRefusedError):
    """Archive contents differ from the signed index."""

    reason = "index-mismatch"


class SourceChangedError(BackupRefusedError):
    """A file changed while it was being backed up."""

    reason = "source-changed"


class UnsupportedSourceError(BackupRefusedError):
    """A symlink, device, FIFO or socket among the paths to back up."""

    reason = "unsupported-source"


class DestinationExistsError(BackupRefusedError, FileExistsError):
    """Restore's destination exists and ``--force`` was not given."""

    reason = "destination-exists"


class DestinationOverlapError(BackupRefusedError):
    """Restore's destination holds, or lies inside, the backup or its folder
    (``--force`` would delete the backup being restored)."""

    reason = "destination-overlaps-backup"


class DestinationMovedError(BackupRefusedError):
    """The path to restore's destination no longer leads to the folder restore
    wrote in (a parent renamed or swapped for a symlink while it ran)."""

    reason = "destination-moved"


class BackupInputError(InputError):
    """Root of unusable backup input: a recipient or identity, or too little free space."""

    reason = "backup-input"


class RecipientError(BackupInputError):
    """A recipient (or recipients file) that is not, or holds no, age X25519 or ssh-ed25519 key."""

    reason = "bad-recipient"


class EncryptFailedError(BackupInputError, RuntimeError):
    """age refused to encrypt to the recipients given (or its child process failed)."""

    reason = "encrypt-failed"


class IdentityFileError(BackupInputError):
    """An identity file that is missing, locked without a passphrase given, or holds no
    age identity or ssh-ed25519 private key."""

    reason = "bad-identity"
