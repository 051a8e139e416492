"""Errors raised by signing and signature verification, one class per reason.

Layer: signing.  Tamper and trust problems are ``RefusedError`` subclasses
(exit 1); unreadable or malformed input files are ``InputError`` subclasses
(exit 2).  Every class carries a stable ``reason`` code (``bad-signature``,
``unknown-key``...) that the JSON output includes, so scripts never parse
messages.
"""

from __future__ import annotations

from ftmanifest.errors import FileTooLargeError as FileTooLargeError  # read by ftmanifest.untrusted
from ftmanifest.errors import InputError, InputNotFoundError, RefusedError
from ftmanifest.errors import NotRegularFileError as NotRegularFileError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ftmanifest.manifest.diff import Change

# --- refusals: the signature set does not establish trust (exit 1) ---------


class SignatureRefusedError(RefusedError):
    """Root of every signature/trust refusal.

    ``payload_unvouched``: the envelope's payload is not the manifest as it is now,
    and no trusted signature covers it, so what it says was signed is not shown.
    """

    reason = "signature-refused"
    payload_unvouched: bool = False


class UnsignedError(SignatureRefusedError):
    """The manifest has no signature envelope beside it (``M.sig.json``)."""

    reason = "unsigned"


class BadSignatureError(SignatureRefusedError):
    """The payload, its type or a signature was altered after signing."""

    reason = "bad-signature"


class WrongPayloadTypeError(SignatureRefusedError):
    """The envelope's ``payloadType`` is not the in-toto type it was signed as."""

    reason = "wrong-payload-type"


class UnknownKeyError(SignatureRefusedError):
    """The signer's key is not in the trust file (or was revoked by deleting its line)."""

    reason = "unknown-key"


class ExpiredKeyError(SignatureRefusedError):
    """The signer's key is past its ``valid-before`` date in the trust file."""

    reason = "expired-key"


class NotYetValidKeyError(SignatureRefusedError):
    """The signer's key is before its ``valid-after`` date in the trust file."""

    reason = "not-yet-valid"


class WrongNamespaceError(SignatureRefusedError):
    """The signer's key is not trusted for the ``ftmanifest`` namespace."""

    reason = "wrong-namespace"


class ThresholdNotMetError(SignatureRefusedError):
    """Fewer distinct trusted keys signed than ``--threshold`` asks for."""

    reason = "threshold-not-met"


class PayloadMismatchError(SignatureRefusedError):
    """The statement is inconsistent, or was signed for another file name."""

    reason = "payload-mismatch"


class ManifestChangedError(SignatureRefusedError):
    """A manifest value differs from what was signed (the error names the fields,
    and ``changes`` carries each with its signed and its current value)."""

    reason = "manifest-changed"
    changes: tuple[Change, ...] = ()


class StaleEnvelopeError(SignatureRefusedError):
    """``sign`` found an envelope for a different version of the manifest."""

    reason = "stale-envelope"


class InsecureKeyPermissionsError(SignatureRefusedError):
    """A private key file is readable by group or others (``chmod 600 KEY``)."""

    reason = "insecure-key-permissions"


class InsecureTrustPathError(SignatureRefusedError):
    """The trust file, or a folder on its path, can be changed by other users
    (ssh's StrictModes: group/world-writable, or owned by someone else)."""

    reason = "insecure-trust-path"


# --- unusable input files (exit 2) -------------------------------------------


class SigningInputError(InputError):
    """Root of every malformed signing-related input file."""

    reason = "signing-input-unusable"


class MalformedEnvelopeError(SigningInputError):
    """The envelope is not one ftmanifest writes (byte for byte) or accepts."""

    reason = "malformed-envelope"


class MalformedPayloadError(SigningInputError):
    """The signed statement cannot be parsed as the statement it should be."""

    reason = "malformed-payload"


class WrongPredicateTypeError(MalformedPayloadError):
    """A trusted signature over a statement of another kind (an adapter binding
    offered as a manifest signature...): unusable here, not tampered with."""

    reason = "wrong-predicate-type"


class MalformedKeyError(SigningInputError):
    """A key file cannot be parsed as an OpenSSH key."""

    reason = "malformed-key"


class UnsupportedKeyError(SigningInputError):
    """A key of a type other than Ed25519 (RSA, ECDSA...)."""

    reason = "unsupported-key"


class BadPassphraseError(SigningInputError):
    """The passphrase does not decrypt the private key."""

    reason = "bad-passphrase"


class KeyExistsError(SigningInputError, FileExistsError):
    """``keygen`` would overwrite an existing key file."""

    reason = "key-exists"


class MalformedTrustFileError(SigningInputError):
    """A line of the allowed-signers file is malformed, which rejects the whole file."""

    reason = "malformed-trust-file"


class TooManySignaturesError(SigningInputError):
    """An envelope with more than 64 signatures."""

    reason = "too-many-signatures"


class WeakKeyError(SigningInputError):
    """A small-order or non-canonical Ed25519 public key (forgeable signatures)."""

    reason = "weak-key"


class MalformedKeyIdError(SigningInputError):
    """A key id that is not ``SHA256:`` and 43 base64 characters."""

    reason = "malformed-keyid"


class PublicKeyGivenError(SigningInputError):
    """``--key`` names a public key (``.pub``); signing needs the private key."""

    reason = "public-key-given"


class WriteFailedError(SigningInputError, OSError):
    """Writing a key or envelope failed (read-only or missing folder...)."""

    reason = "write-failed"


class TrustFileNotFoundError(InputNotFoundError):
    """No allowed-signers file was given or found."""

    reason = "no-trust-file"


class KeyNotFoundError(InputNotFoundError):
    """The key file does not exist."""

    reason = "no-key-file"


# Status codes a single signature can have in a report (besides these errors).
STATUS_VALID = "valid"
