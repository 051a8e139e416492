"""Results: scoring predictions, comparing runs against the manifest's guards,
and the audit and report built on them.

Layer: results, above the manifest, hashing and scanning, below the CLI.
Metrics and the comparison are pure functions over plain data; reading
predictions and reading or writing results files are the only I/O in them.
"""
