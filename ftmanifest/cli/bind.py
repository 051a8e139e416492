"""``ftmanifest bind ADAPTER --manifest M --key K``: bind an adapter to its base.

Layer: commands - edge (parsing and printing; the work is ``ftmanifest.adapter.bind``).
Exit 0 bound, 1 refused (the base drifted from the manifest, the adapter's
LoRA facts are not the manifest's, or its tensors do not fit the base),
2 unusable input or usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ftmanifest.adapter.bind import BindRefusedError, bind_adapter
from ftmanifest.cli._args import add_format_argument
from ftmanifest.cli._render import adapter_table
from ftmanifest.manifest import load_manifest
from ftmanifest.output import findings_json, to_json
from ftmanifest.safe_text import escape
from ftmanifest.signing.keys import load_private_key
from ftmanifest.signing.passphrase import for_unlock

DESCRIPTION = """\
Bind a trained peft adapter to the manifest's base model: the base is checked
against the manifest, the adapter's LoRA settings against the manifest's
method and its tensors against the base's shapes; then a binding signed with
--key is written into the adapter folder, for `ftmanifest check-adapter`.
With an ECDSA P-256 key (`ftmanifest keygen --type ecdsa-p256`) the folder
also gets model.sig, an OpenSSF model-signing bundle that `model_signing
verify key ADAPTER --signature ADAPTER/model.sig --public_key KEY.pub.pem`
checks (needs `pip install 'ftmanifest[interop]'`); an Ed25519 key gets a
note that model.sig was not written.
Exit 0 bound, 1 refused (the base drifted, the adapter is not the manifest's
method, or its tensors do not fit the base), 2 unusable input or usage.
"""

EXAMPLES = """\
examples:
  ftmanifest bind out/adapter --manifest exp.yaml --key keys/alice
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bind",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        help="bind a trained adapter to the manifest's base model (signed)",
    )
    p.add_argument("adapter", type=Path, metavar="ADAPTER_DIR", help="the peft adapter folder")
    p.add_argument("--manifest", type=Path, required=True, metavar="MANIFEST",
                   help="the manifest the adapter was trained from")  # fmt: skip
    p.add_argument("--key", type=Path, required=True, metavar="PATH",
                   help="private key that signs the binding (Ed25519, or ECDSA P-256, "
                   "which also writes model.sig)")  # fmt: skip
    p.add_argument("--passphrase-env", metavar="VAR",
                   help="read the key's passphrase from environment variable VAR "
                   "(else asked if needed)")  # fmt: skip
    p.add_argument("--no-cache", action="store_true", help="rehash every file")
    p.add_argument("--allow-outside", action="store_true",
                   help="allow a model path outside the manifest's folder")  # fmt: skip
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    load_manifest(args.manifest)  # an unusable manifest is named before the key is asked for
    key_path = Path(args.key).expanduser()
    ask, given = for_unlock(args.passphrase_env, str(key_path)), []

    def unlock() -> bytes:  # asked once; model-signing reads the key file again
        given.append(ask())
        return given[-1]

    key = load_private_key(key_path, unlock)
    try:
        result = bind_adapter(
            args.adapter,
            args.manifest,
            key,
            use_cache=not args.no_cache,
            allow_outside=args.allow_outside,
            key_path=key_path,
            password=given[-1] if given else None,
        )
    except BindRefusedError as exc:
        if args.format != "json":
            raise
        sys.stdout.write(findings_json(exc.findings, adapter=str(args.adapter), bound=False))
        return exc.exit_code
    b = result.binding
    if args.format == "json":
        sys.stdout.write(to_json({
            "adapter": str(args.adapter), "bound": True, "binding": str(result.envelope_path),
            "subjects": list(result.subjects), "predicate": b.predicate(),
            "model_sig": str(result.model_sig) if result.model_sig else None,
            "notes": list(result.notes),
            "findings": [f.to_dict() for f in result.findings],
        }))  # fmt: skip
        return 0
    out = sys.stdout
    base = f"{b.base_repo}@{b.base_revision}" if b.base_repo else "local folder"
    out.write(f"bound:     {escape(str(args.adapter))}\n")
    out.write(f"base:      {escape(base)}\n")
    out.write(f"tensors:   {b.base_tensor_digest} ({b.base_tensors} tensors)\n")
    out.write(f"manifest:  {escape(str(args.manifest))} ({b.manifest_digest})\n")
    if b.method.get("kind") == "lora":
        out.write(f"method:    lora r={b.method.get('r')} alpha={b.method.get('alpha')} "
                  f"targets={escape(str(b.method.get('target_modules')))}\n")  # fmt: skip
    else:  # another peft method: bound by its config's digest
        out.write(f"method:    {escape(str(b.method.get('peft_type')))} "
                  f"config {b.method.get('config_digest')}\n")  # fmt: skip
    out.write(f"signed:    {escape(str(result.envelope_path))} "
              f"({len(result.subjects)} file(s) as subjects)\n")  # fmt: skip
    if result.model_sig is not None:
        out.write(f"model.sig: {escape(str(result.model_sig))} (OpenSSF model-signing, "
                  "key method)\n")  # fmt: skip
    for note in result.notes:
        out.write(f"note:      {escape(note)}\n")
    if result.findings:
        out.write("\n" + adapter_table(list(result.findings)))
    return 0
