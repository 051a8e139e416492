"""Authoring a manifest from what a user already has (``ftmanifest init --from``).

Layer: edges (authoring), above the file-access rooms (it reads configs, model folders,
data files and the hub cache) and below ``cli``.  One module per source kind,
registered in ``sources.READERS``; ``compose.author`` is the entry point.
Nothing here imports torch, transformers or peft: their configs are read as
the JSON or YAML files they are.
"""
