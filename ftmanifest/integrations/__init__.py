"""Integrations with other tools (pre-commit, transformers).

Layer: edge.  Heavy frameworks are imported only inside the module that
integrates with them.
"""
