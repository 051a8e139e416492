"""One LSH index over the earlier splits a split is compared with, queried once a record.

Layer: judging rooms - data (pure; the indexes are ``rensa.RMinHashLSH``).  The leakage
check asks each record of a training split for its near duplicates in every earlier
split of another role (test, eval) and in its own split: three LSH queries a record,
each some 4 us against indexes of a hundred thousand records (random reads of the
band tables).  The earlier splits do not change while a later one is read, so their
records also go into one pooled index per later split (``Pools``), keyed by record
number and split (``number * width + slot``); one query of it, split by slot, gives
what one query of each would (an LSH query returns every key sharing a band with
the query, key by key), so a training record costs two queries.  The earlier splits'
own indexes are kept only where a later split still queries one alone.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any


class Pools:
    """The pooled index of each later split with two or more earlier partners.

    ``partners``: each split's name -> the names of the splits it is compared with
    (itself included), in the order it compares them; ``make`` builds an empty index."""

    def __init__(self, partners: Mapping[str, Sequence[str]], make: Callable[[], Any]) -> None:
        self.members: dict[str, tuple[str, ...]] = {}
        self.indexes: dict[str, Any] = {}
        self._slots: dict[str, list[tuple[Any, int, int]]] = defaultdict(list)
        self._alone: set[str] = set()  # earlier splits some later split queries alone
        for later, names in partners.items():
            earlier = tuple(n for n in names if n != later)
            if len(earlier) < 2:
                self._alone.update(earlier)
                continue
            self.members[later] = earlier
            self.indexes[later] = index = make()
            for slot, name in enumerate(earlier):
                self._slots[name].append((index, slot, len(earlier)))

    def insert(self, name: str, number: int, minhash: Any) -> None:
        """Add record ``number`` of split ``name`` to every pool that holds the split."""
        for index, slot, width in self._slots.get(name, ()):
            index.insert(number * width + slot, minhash)

    def query(self, later: str, minhash: Any) -> dict[str, list[int]]:
        """The record numbers of each earlier split pooled for ``later`` that share a band
        with ``minhash`` (splits with none left out)."""
        members = self.members[later]
        width = len(members)
        out: dict[str, list[int]] = {}
        for key in self.indexes[later].query(minhash):
            number, slot = divmod(key, width)
            out.setdefault(members[slot], []).append(number)
        return out

    def alone(self, name: str) -> bool:
        """Whether a later split queries the index of ``name`` by itself."""
        return name in self._alone
