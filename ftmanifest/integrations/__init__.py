"""Integrations with other tools (pre-commit, transformers).

Layer: edges (above every judging room, below the commands). Heavy frameworks
are imported only inside the module that integrates with them.
"""
