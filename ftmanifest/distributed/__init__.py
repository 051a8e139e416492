"""Running ftmanifest's checks across the ranks of a ``torchrun`` job.

Layer: edges (joins the job's process group through
``torch.distributed``, imported lazily).  ``comm`` says which rank this
process is (from the variables torchrun, Slurm or Kubernetes launchers set)
and gathers one picklable object from every rank with a deadline, so a rank
that dies or hangs is a refusal, never a hang.
"""
