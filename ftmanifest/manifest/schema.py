"""The JSON Schema, generated from the pydantic model.

Layer: manifest.  ``generate()`` builds it from the model (slow: imports and
builds every pydantic model); ``packaged()`` reads the copy shipped inside the
package (fast: what ``lint`` uses).  ``make schema`` writes both the packaged
copy and ``schema/ftmanifest.schema.json``; a test fails when either is stale.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

SCHEMA_ID = "https://ftmanifest.dev/schema/v1/ftmanifest.schema.json"
PACKAGED_NAME = "ftmanifest.schema.json"


def generate() -> dict[str, Any]:
    from ftmanifest.manifest.model import Manifest

    body = Manifest.model_json_schema()
    head = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
    }
    return {**head, **body}


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


@lru_cache(maxsize=1)
def packaged() -> dict[str, Any]:
    text = Path(__file__).with_name(PACKAGED_NAME).read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
