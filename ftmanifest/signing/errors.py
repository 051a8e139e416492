"""Errors raised by signing and signature verification, one class per reason.

Layer: signing.  Tamper and trust problems are ``RefusedError`` subclasses
(exit 1); unreadable or malformed input files are ``InputError`` subclasses
(exit 2).  Every class carries a stable ``reason`` code (``bad-signature``,
``unknown-key``...) that the JSON output includes, so scripts never parse
messages.
"""

from __future__ import annotations

from ftmanifest.errors import InputError, InputNotFoundError, RefusedError

# --- refusals: the signature set does not establish trust (exit 1) ---------


class SignatureRefusedError(RefusedError):
    """Root of every signature/trust refusal."""


class UnsignedError(SignatureRefusedError):
    reason = "unsigned"


class BadSignatureError(SignatureRefusedError):
    reason = "bad-signature"


class WrongPayloadTypeError(SignatureRefusedError):
    reason = "wrong-payload-type"


class UnknownKeyError(SignatureRefusedError):
    reason = "unknown-key"


class ExpiredKeyError(SignatureRefusedError):
    reason = "expired-key"


class NotYetValidKeyError(SignatureRefusedError):
    reason = "not-yet-valid"


class WrongNamespaceError(SignatureRefusedError):
    reason = "wrong-namespace"


class ThresholdNotMetError(SignatureRefusedError):
    reason = "threshold-not-met"


class PayloadMismatchError(SignatureRefusedError):
    reason = "payload-mismatch"


class ManifestChangedError(SignatureRefusedError):
    reason = "manifest-changed"


class StaleEnvelopeError(SignatureRefusedError):
    """``sign`` found an envelope for a different version of the manifest."""

    reason = "stale-envelope"


class InsecureKeyPermissionsError(SignatureRefusedError):
    reason = "insecure-key-permissions"


class InsecureTrustPathError(SignatureRefusedError):
    """The trust file, or a folder on its path, can be changed by other users
    (ssh's StrictModes: group/world-writable, or owned by someone else)."""

    reason = "insecure-trust-path"


# --- unusable input files (exit 2) -------------------------------------------


class SigningInputError(InputError):
    """Root of every malformed signing-related input file."""


class MalformedEnvelopeError(SigningInputError):
    reason = "malformed-envelope"


class MalformedPayloadError(SigningInputError):
    reason = "malformed-payload"


class WrongPredicateTypeError(MalformedPayloadError):
    """A trusted signature over a statement of another kind (an adapter binding
    offered as a manifest signature...): unusable here, not tampered with."""

    reason = "wrong-predicate-type"


class MalformedKeyError(SigningInputError):
    reason = "malformed-key"


class UnsupportedKeyError(SigningInputError):
    reason = "unsupported-key"


class BadPassphraseError(SigningInputError):
    reason = "bad-passphrase"


class KeyExistsError(SigningInputError, FileExistsError):
    reason = "key-exists"


class MalformedTrustFileError(SigningInputError):
    reason = "malformed-trust-file"


class NotRegularFileError(SigningInputError):
    """An envelope, trust or key file that is a FIFO, device or folder."""

    reason = "not-regular-file"


class FileTooLargeError(SigningInputError):
    reason = "file-too-large"


class TooManySignaturesError(SigningInputError):
    reason = "too-many-signatures"


class WeakKeyError(SigningInputError):
    """A small-order or non-canonical Ed25519 public key (forgeable signatures)."""

    reason = "weak-key"


class MalformedKeyIdError(SigningInputError):
    reason = "malformed-keyid"


class PublicKeyGivenError(SigningInputError):
    reason = "public-key-given"


class WriteFailedError(SigningInputError, OSError):
    """Writing a key or envelope failed (read-only or missing folder...)."""

    reason = "write-failed"


class TrustFileNotFoundError(InputNotFoundError):
    reason = "no-trust-file"


class KeyNotFoundError(InputNotFoundError):
    reason = "no-key-file"


# Status codes a single signature can have in a report (besides these errors).
STATUS_VALID = "valid"
