"""Mutate-then-check: any one changed byte of a bound adapter is refused.

Hypothesis picks a file of the bound adapter (the envelope included) and a
byte to flip; ``check_adapter`` must return a refusal, never accept, and
never raise (a corrupted config or header is a refusal naming the changed
file, not unusable input).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ftmanifest.adapter.check import check_adapter

FILES = ["adapter_model.safetensors", "adapter_config.json", "ftmanifest-binding.sig.json"]


@settings(max_examples=40)
@given(name=st.sampled_from(FILES), where=st.floats(0, 1, exclude_max=True), bit=st.integers(0, 7))
def test_one_flipped_bit_anywhere_is_refused(
    bound: dict[str, Path], name: str, where: float, bit: int
) -> None:
    project = bound["gpt2"]
    with tempfile.TemporaryDirectory() as tmp:
        adapter = Path(shutil.copytree(project / "adapter", Path(tmp) / "adapter"))
        target = adapter / name
        data = bytearray(target.read_bytes())
        data[int(where * len(data))] ^= 1 << bit
        target.write_bytes(bytes(data))
        report = check_adapter(
            adapter,
            base_dir=project / "base",
            trust_path=project / ".ftmanifest" / "allowed_signers",
            use_cache=False,
        )
    assert not report.ok
    assert {f.rule for f in report.findings if f.severity == "error"} & {
        "adapter.files-changed",
        "adapter.binding-malformed",
        "adapter.binding-untrusted",
        "adapter.binding-unsigned",
    }
