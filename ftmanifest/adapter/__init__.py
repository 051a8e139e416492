"""Bind a PEFT adapter to its base model's exact weights; refuse it anywhere else.

Layer: edge around a pure judging core.  ``tensors`` digests safetensors
weights without torch; ``architecture`` matches peft's target modules and
LoRA shapes against a base model's headers; ``binding`` writes the binding
(safetensors metadata, ``adapter_config.json`` and a signed in-toto
statement); ``check`` judges an adapter against a base and returns findings;
``load`` checks, then loads through peft (torch imported there only).
"""
