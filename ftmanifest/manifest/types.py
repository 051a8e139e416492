"""Named constrained types and the strict base model.

Layer: pure core - manifest (pure).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema

from ftmanifest.manifest.patterns import HUB_REPO_PATTERN, ONE_LINE_PATTERN, PACKAGE_NAME_PATTERN

DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"

Digest = Annotated[
    str,
    StringConstraints(pattern=DIGEST_PATTERN),
    Field(description="A content digest that names its algorithm: sha256:<64 lowercase hex>."),
]
Identifier = Annotated[
    str,
    StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$"),
    Field(description="An identifier: letters, digits, '.', '_', '-', '/'; at most 128 chars."),
]
NonEmpty = Annotated[str, StringConstraints(min_length=1)]
PackageName = Annotated[
    str,
    StringConstraints(pattern=PACKAGE_NAME_PATTERN),
    Field(description="A distribution name (PEP 508): letters, digits, '.', '_', '-'."),
]
OneLine = Annotated[
    str,
    StringConstraints(pattern=ONE_LINE_PATTERN),
    Field(description="Text on one line: no control characters or line separators."),
]
HubRepoId = Annotated[
    str,
    StringConstraints(pattern=HUB_REPO_PATTERN),
    Field(description="A Hugging Face hub repo id: name or org/name."),
]
# pydantic writes a constrained key type as patternProperties, which lets any
# other key through unchecked: say it as propertyNames and additionalProperties.
Packages = Annotated[
    dict[PackageName, OneLine],
    WithJsonSchema(
        {
            "type": "object",
            "propertyNames": {
                "pattern": PACKAGE_NAME_PATTERN,
                "description": "A distribution name (PEP 508): letters, digits, '.', '_', '-'.",
            },
            "additionalProperties": {
                "type": "string",
                "pattern": ONE_LINE_PATTERN,
                "description": "A version pin on one line: no control characters or line "
                "separators.",
            },
        }
    ),
]
Rate = Annotated[float, Field(ge=0.0, le=1.0)]
# Integers stay within I-JSON's exact range (RFC 7493 2.2): the canonical form
# (RFC 8785) cannot represent a larger one, so the schema refuses it up front,
# naming the field, instead of `digest`/`sign`/`verify` failing later.
MAX_SAFE_INT = 2**53 - 1
PositiveInt = Annotated[int, Field(gt=0, le=MAX_SAFE_INT)]
NonNegativeInt = Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]
FileMode = Annotated[
    str,
    StringConstraints(pattern=r"^0?[0-7]{3}$"),
    Field(description="An octal file mode such as 0600."),
]


class Strict(BaseModel):
    """Base of every manifest section: unknown fields are refused."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False
    )


class FileRef(Strict):
    """A file named by path and pinned by digest."""

    path: NonEmpty = Field(description="Path, relative to the manifest's folder.")
    digest: Digest | None = Field(default=None, description="sha256 digest of the file.")
