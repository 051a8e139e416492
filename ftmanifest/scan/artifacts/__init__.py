"""Judging binary artifacts without executing them: pickles, archives, headers.

Layer: judging rooms - the scanner's artifact room.  ``sniff`` decides a file's format
from its bytes; ``binary`` dispatches streams (compressed, zip and tar containers, npy)
to the pickle walker (``pickles`` over ``pickle_stream``/``pickle_ops``, sequences in
``pickle_sequence``, verdicts in ``pickle_allowlist``) and the safetensors header check.
A new container or model format goes here.
"""
