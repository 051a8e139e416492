"""Preflight, estimate and plan: check and size one full step before renting GPUs.

Layer: judging rooms (after verify, before data).  torch, transformers and
peft are imported inside the functions of this package only (and of
``adapter`` and ``integrations``), so ``lint``,
``verify``, ``scan`` and ``sign`` start without them.  ``recipe`` builds the
manifest's model, data and recipe; ``steps`` runs one training step and
measures it; ``checks`` holds the named rows; ``run`` runs them and writes
the preflight record.
"""
