"""Scanning text for secrets and personal data: readers, decoders, rules, the matcher.

Layer: judging rooms - the scanner's text room.  Readers turn files (plain, gzip,
Parquet, UTF-16/32, JSON strings) into byte buffers; ``secret_rules`` with the
validators in ``secrets``, ``pii``, ``phones`` and ``ids`` say what a finding is;
``matcher`` finds the candidates (Hyperscan or ``re``).  A new text format goes here.
"""
