"""Results: scoring predictions, comparing runs against the manifest's guards,
and the audit and report built on them.

Layer: judging rooms (after data, before backup).
Metrics and the comparison are pure functions over plain data; reading
predictions and reading or writing results files are the only I/O in them.
"""
