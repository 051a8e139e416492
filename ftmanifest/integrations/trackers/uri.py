"""A tracker's address as a record may keep it: no user name, password or query.

Layer: edges (integrations).  Tracking URIs may carry credentials
(``https://user:token@host``) or tokens in the query; ledger records are
shared and signed, so only scheme, host and path are kept.
"""

from __future__ import annotations


def public_uri(uri: str | None) -> str | None:
    """``uri`` without user information, query or fragment (``sqlite:////x.db`` is kept as is)."""
    if not uri:
        return uri
    base = uri.split("#", 1)[0].split("?", 1)[0]
    scheme, sep, rest = base.partition("://")
    if not sep:
        return base
    netloc, slash, path = rest.partition("/")
    return f"{scheme}://{netloc.rpartition('@')[2]}{slash}{path}"
