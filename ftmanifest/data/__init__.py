"""Checks over a manifest's data: split leakage, statistics, images, counts and digests.

Layer: judging rooms (after preflight, before results).  ``text`` says which fields
are a record's text and how it is normalised (pure); ``leakage`` streams the
splits through ``recordio.iter_records`` and returns what it found as data
(duplicate counts per split pair, the worst examples), with ``judge`` deciding
what the manifest's tolerance refuses; ``clean`` writes a training file
without its leaking records.  The MinHash/LSH library (rensa) is imported
inside the functions that need it, so ``lint``/``verify``/``scan`` never load it.

``summary`` runs the rest of ``data check``: ``stats`` (categories
and lengths per text split, one streaming pass), ``tokens`` (the pinned
tokenizer, offline), ``categories`` (missing or too few, judged; pure),
``images`` (image class folders, Pillow imported lazily) and ``counts``
(records and digests, through verify's own drift rows).
"""
