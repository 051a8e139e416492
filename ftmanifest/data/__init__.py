"""Checks over a manifest's data: split leakage (exact and near duplicates).

Layer: data (above ``recordio``, below ``cli``).  ``text`` says which fields
are a record's text and how it is normalised (pure); ``leakage`` streams the
splits through ``recordio.iter_records`` and returns what it found as data
(duplicate counts per split pair, the worst examples), with ``judge`` deciding
what the manifest's tolerance refuses; ``clean`` writes a training file
without its leaking records.  The MinHash/LSH library (rensa) is imported
inside the functions that need it, so ``lint``/``verify``/``scan`` never load it.
"""
