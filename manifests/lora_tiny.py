"""Train one real LoRA step on the tiny example and save the adapter.

Used by `make demo` before `ftmanifest bind`: the adapter's rank, alpha, dropout
and target modules come from the manifest's ``method`` (kind ``lora``), and the
base is loaded with ``load_pinned`` (exactly the pinned snapshot).
Usage: python lora_tiny.py MANIFEST OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import ftmanifest
from ftmanifest.errors import FtManifestError
from ftmanifest.integrations.transformers import load_pinned
from ftmanifest.manifest import load_manifest
from ftmanifest.output import error_text


def main(manifest: Path, out: Path) -> int:
    import torch
    from peft import LoraConfig, get_peft_model

    ftmanifest.seed_everything(manifest)
    try:
        method = load_manifest(manifest).manifest.method
        model, tokenizer = load_pinned(manifest)
    except FtManifestError as exc:
        print(f"refused:\n{error_text(exc)}", file=sys.stderr)
        return exc.exit_code
    if method is None or method.kind != "lora":
        print(f"{manifest}: method.kind is not lora", file=sys.stderr)
        return 2
    config = LoraConfig(
        r=method.r,
        lora_alpha=method.alpha,
        lora_dropout=method.dropout,
        target_modules=method.target_modules,
        bias=method.bias,
        task_type="CAUSAL_LM",
    )
    peft_model = get_peft_model(model, config)
    batch = tokenizer(["please fix the router ."], return_tensors="pt")
    optimizer = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=1e-2)
    loss = peft_model(**batch, labels=batch["input_ids"]).loss
    loss.backward()
    optimizer.step()
    peft_model.save_pretrained(out)
    print(f"one LoRA step (loss {loss.item():.3f}); adapter saved to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
