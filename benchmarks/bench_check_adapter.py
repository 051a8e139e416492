"""Benchmark ``check-adapter`` against a generated multi-GB base, vs ``openssl dgst -sha256``.

  .venv/bin/python benchmarks/bench_check_adapter.py [--quick] [--repeat 2]

Generates a Llama-7B-like base in safetensors (F16 attention and MLP
matrices of hidden size 4096, norms, ``--shard-mib`` shards; total
``FTM_BENCH_GB`` GiB, default 1, ``--quick`` 256 MiB), a LoRA adapter for it
(q_proj/v_proj, r=8) with a signed binding, then, in one run:

1. the first check (``check_adapter(..., base_dir=...)``, no cache: every
   tensor byte hashed once, shards in parallel) vs ``openssl dgst -sha256``
   over the same shards, page cache warmed once for both (target: >= 0.8
   of openssl's throughput);
2. the same first check on a base in one file (nothing to split between
   shards), with the page cache warm, and cold (each file evicted with
   ``posix_fadvise(DONTNEED)`` before each tool runs: the disk is read);
3. the second check through the stat cache, nothing changed (target: < 1 s).

Timings are the best of ``--repeat`` runs, tools alternating.  All data lives
in a temporary folder, deleted at the end; the stat cache is a private one
there.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _report import print_table  # noqa: E402

from ftmanifest.adapter.base import BaseModel  # noqa: E402
from ftmanifest.adapter.binding import Binding, installed_versions  # noqa: E402
from ftmanifest.adapter.check import check_adapter  # noqa: E402
from ftmanifest.adapter.signed import sign_binding  # noqa: E402
from ftmanifest.adapter.tensors import tensor_digest, weight_files  # noqa: E402
from ftmanifest.statcache import ENV_CACHE_DIR, RACY_NS  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30
HIDDEN, MLP = 4096, 11008
LAYER = {  # name -> shape; F16
    "input_layernorm.weight": (HIDDEN,),
    "self_attn.q_proj.weight": (HIDDEN, HIDDEN),
    "self_attn.k_proj.weight": (HIDDEN, HIDDEN),
    "self_attn.v_proj.weight": (HIDDEN, HIDDEN),
    "self_attn.o_proj.weight": (HIDDEN, HIDDEN),
    "post_attention_layernorm.weight": (HIDDEN,),
    "mlp.gate_proj.weight": (MLP, HIDDEN),
    "mlp.up_proj.weight": (MLP, HIDDEN),
    "mlp.down_proj.weight": (HIDDEN, MLP),
}


def nbytes(shape: tuple[int, ...], size: int = 2) -> int:
    n = size
    for d in shape:
        n *= d
    return n


def write_safetensors(path: Path, tensors: list[tuple[str, str, tuple[int, ...]]], fill: bytes):
    """A valid safetensors file; tensor bytes cut from ``fill`` (a random block)."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dtype, shape in tensors:
        size = nbytes(shape, 2 if dtype == "F16" else 4)
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        for i, (_, dtype, shape) in enumerate(tensors):
            left = nbytes(shape, 2 if dtype == "F16" else 4)
            start = (i * 4099) % (len(fill) // 2)
            while left:
                part = fill[start : start + min(left, len(fill) - start)]
                fh.write(part)
                left -= len(part)
                start = 0


def make_base(folder: Path, total: int, shard: int, fill: bytes) -> list[Path]:
    folder.mkdir()
    names: list[tuple[str, str, tuple[int, ...]]] = []
    size, layer = 0, 0
    while size < total:
        for part, shape in LAYER.items():
            names.append((f"model.layers.{layer}.{part}", "F16", shape))
            size += nbytes(shape)
        layer += 1
    shards: list[list[tuple[str, str, tuple[int, ...]]]] = [[]]
    used = 0
    for entry in names:
        if used and used + nbytes(entry[2]) > shard:
            shards.append([])
            used = 0
        shards[-1].append(entry)
        used += nbytes(entry[2])
    files, weight_map = [], {}
    for i, tensors in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write_safetensors(folder / name, tensors, fill)
        weight_map.update({t[0]: name for t in tensors})
        files.append(folder / name)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    return files


def make_adapter(folder: Path, layers: int, fill: bytes) -> None:
    folder.mkdir()
    tensors = []
    for i in range(layers):
        for proj in ("q_proj", "v_proj"):
            m = f"base_model.model.model.layers.{i}.self_attn.{proj}"
            tensors += [(f"{m}.lora_A.weight", "F32", (8, HIDDEN)),
                        (f"{m}.lora_B.weight", "F32", (HIDDEN, 8))]  # fmt: skip
    write_safetensors(folder / "adapter_model.safetensors", tensors, fill)
    config = {"peft_type": "LORA", "r": 8, "lora_alpha": 16, "lora_dropout": 0.0,
              "target_modules": ["q_proj", "v_proj"], "bias": "none"}  # fmt: skip
    (folder / "adapter_config.json").write_text(json.dumps(config))


def openssl(paths: list[Path]) -> None:
    subprocess.run(["openssl", "dgst", "-sha256", *map(str, paths)], check=True,
                   capture_output=True)  # fmt: skip


def warm(paths: list[Path]) -> None:
    buf = bytearray(4 * MiB)
    for p in paths:
        with p.open("rb", buffering=0) as f:
            while f.readinto(buf):
                pass


def drop(paths: list[Path]) -> None:
    """Evict the files from the page cache (clean pages; no root needed)."""
    os.sync()
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


Row = tuple[str, str, str, str, str, bool]


def first_check(tmp: Path, total: int, shard: int, fill: bytes, repeat: int, key: object,
                cold: bool) -> tuple[Row, Path, Path, list[Path]]:  # fmt: skip
    """Build a base cut in ``shard``-byte files and its bound adapter under ``tmp``;
    time the first check against openssl, warm (page cache filled) or cold."""
    base, adapter = tmp / "base", tmp / "adapter"
    files = make_base(base, total, shard, fill)
    size = sum(p.stat().st_size for p in files)
    layers = 1 + max(int(n.split(".")[2]) for n in json.loads(
        (base / "model.safetensors.index.json").read_text())["weight_map"])  # fmt: skip
    make_adapter(adapter, layers, fill)
    digest = tensor_digest(weight_files(base), use_cache=False)
    binding = Binding(digest.digest, digest.tensors, versions=installed_versions(),
                      method={"kind": "lora", "r": 8},
                      base_config_digest=BaseModel(base).config_digest(),
                      base_bytes=digest.bytes)  # fmt: skip
    sign_binding(adapter, binding, key, use_cache=False)  # type: ignore[arg-type]
    trust = tmp.parent / "allowed_signers"
    prepare = drop if cold else warm
    t_ossl = t_ours = float("inf")
    for _ in range(repeat):
        prepare(files)
        t = time.perf_counter()
        openssl(files)
        t_ossl = min(t_ossl, time.perf_counter() - t)
        prepare(files)
        t = time.perf_counter()
        report = check_adapter(adapter, base_dir=base, trust_path=trust, use_cache=False)
        t_ours = min(t_ours, time.perf_counter() - t)
        assert report.ok, report.findings
    mib = size / MiB
    what = "1 file" if len(files) == 1 else f"{len(files)} shards"
    row = (f"first check-adapter, {mib:.0f} MiB in {what}{', cold' if cold else ''}",
           f"{mib / t_ours:.0f} MiB/s", f"{mib / t_ossl:.0f} MiB/s (openssl)",
           f"{t_ossl / t_ours:.2f}", ">= 0.8", t_ossl / t_ours >= 0.8)  # fmt: skip
    return row, adapter, base, files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="256 MiB base, for a smoke run")
    parser.add_argument("--repeat", type=int, default=2, help="runs per tool; best counts")
    parser.add_argument("--shard-mib", type=int, default=512, help="shard size in MiB")
    args = parser.parse_args()
    total = 256 * MiB if args.quick else int(float(os.environ.get("FTM_BENCH_GB", "1")) * GiB)
    if shutil.which("openssl") is None:
        print("openssl not found: it is the reference", file=sys.stderr)
        return 2
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ftmanifest.signing.keys import public_key_line

    rows: list[Row] = []
    tmp = Path(tempfile.mkdtemp(prefix="ftm-bench-adapter-"))
    os.environ[ENV_CACHE_DIR] = str(tmp / "cache")
    try:
        fill = os.urandom(64 * MiB)
        key = Ed25519PrivateKey.generate()
        trust = tmp / "allowed_signers"
        trust.write_text(
            f'b@example.org namespaces="ftmanifest" {public_key_line(key.public_key())}\n'
        )
        cases = [("sharded", args.shard_mib * MiB, False), ("single", 1 << 62, False),
                 ("single-cold", 1 << 62, True)]  # fmt: skip
        for name, shard, cold in cases:
            (tmp / name).mkdir()
            row, adapter, base, files = first_check(tmp / name, total, shard, fill,
                                                    args.repeat, key, cold)  # fmt: skip
            rows.append(row)
            if name != "sharded":
                shutil.rmtree(tmp / name)
                continue
            # Freshly written files are racy (not cached): wait out the window once.
            newest = max(max(p.stat().st_mtime_ns, p.stat().st_ctime_ns) for p in files)
            time.sleep(max(0, newest + RACY_NS + 10_000_000 - time.time_ns()) / 1e9)

            def check(adapter: Path = adapter, base: Path = base) -> None:
                report = check_adapter(adapter, base_dir=base, trust_path=trust)
                assert report.ok, report.findings

            t = time.perf_counter()
            check()
            t_first = time.perf_counter() - t
            t = time.perf_counter()
            check()
            t_again = time.perf_counter() - t
            rows.append(
                ("second check-adapter (stat cache)", f"{t_again * 1000:.0f} ms",
                 f"{t_first * 1000:.0f} ms (first, filling it)", f"{t_first / t_again:.0f}x",
                 "< 1 s", t_again < 1.0)
            )  # fmt: skip
            shutil.rmtree(tmp / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    return print_table(rows, f"base: {total / GiB:.2f} GiB")


if __name__ == "__main__":
    sys.exit(main())
