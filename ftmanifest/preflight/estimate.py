"""Memory of one training step, from the model's config alone (no weights loaded).

Layer: judging rooms - pure core (``estimate`` and ``levers`` take an ``Architecture``
and a ``Setup`` and return dataclasses; ``setup_from_manifest`` reads a loaded manifest;
``shapes.read_architecture`` is the only I/O, at the edge).

Parts, per process, in bytes (``b`` micro-batch, ``s`` sequence length, ``h``
hidden size, ``kv`` key/value width ``num_key_value_heads * head_dim``, ``i``
MLP width, ``a`` heads, ``V`` vocabulary, ``L`` layers, ``p`` bytes of the
compute precision: 4 for fp32/tf32, 2 for bf16/fp16/fp8):

- **weights**: every parameter (counted from the config, ``shapes``) at 4
  bytes for full fine-tuning (fp32 master weights; bf16/fp16 is autocast, and
  autocast keeps a 2-byte copy of each weight while the step runs, its own
  row); with LoRA the frozen base at ``p`` bytes and the adapter at 4 (peft
  keeps adapters in fp32).
- **gradients**: trainable parameters x 4; DDP adds its gradient buckets (a
  second copy).
- **optimizer states**: trainable x states x state bytes (AdamW 2, SGD with
  momentum / Lion / RMSprop / Adagrad 1, plain SGD 0, Adafactor rows + columns
  of each matrix; ``state_precision`` or an ``8bit`` name: 1 byte, plus 4
  bytes per 256-element block).
- **activations**, saved for the backward pass, per layer per token, in
  elements of ``p`` bytes: ``4h`` for the two norms (input and normalised
  output each), ``3h + 2kv`` for attention (q, k, v as the kernel keeps them,
  its output, and the output projection's input), and for the MLP ``4i`` when
  gated (gate, activation, up, product: Llama) or ``2i`` with a fused
  activation (``5i`` for transformers' composite ``gelu_new``: GPT-2);
  ``eager`` attention adds the ``a*s`` softmax output; hidden dropout adds a
  1-byte mask per element.  So Llama-like: ``s*b*L*(7h + 2kv + 4i)*p``,
  GPT-2: ``s*b*L*(9h + 5i)*p``.  With activation checkpointing only each
  layer's input is kept (``s*b*L*h*p``) plus one layer recomputed in the
  backward.  The head adds ``s*b*V*(p + 8)`` (the logits, an fp32 copy for
  the loss and its log-probabilities).  LoRA adds per wrapped module the ``r``
  outputs of ``lora_A`` (and the dropped-out input when ``dropout > 0``).
  Source: the method of Korthikanti et al., "Reducing Activation Recomputation
  in Large Transformer Models" (arXiv:2205.05198, section 4.1: count the
  tensors each operation saves for backward), applied to transformers'
  Llama and GPT-2 implementations with PyTorch's fused attention (sdpa: no
  ``s*s`` matrix kept).
- **sharding** by ``distributed.world_size`` ``N``: DDP keeps a full replica
  per process; ZeRO-1 divides optimizer states by ``N``, ZeRO-2 also the
  gradients, ZeRO-3 and FSDP (full shard) also the weights, and gather one
  layer's weights at a time.  Activations are never sharded.

The total is the steady-state peak of a step that keeps its gradients while
activations are alive (gradient accumulation, or the optimizer's states from
the previous step): the sum of the parts.  The CUDA context, kernels'
workspaces and the Python runtime are not in it.

**Which allocator** (``Setup.allocator``, from ``host_allocator``):
``exact`` counts live tensors only (what ``torch.cuda.max_memory_allocated``
reports, ``device``, or a host with ``MALLOC_MMAP_THRESHOLD_`` fixed).  Under
glibc's default malloc (``glibc-dynamic``) the mmap threshold rises to the
largest block freed, up to 32 MiB, so the step's tensors below it come from
the heap and stay resident after they are freed: the row ``allocator
retention (glibc malloc)`` adds ``0.75`` x the saved activations and logits
whose single tensors are at most 32 MiB.  The factor is fitted to real CPU
steps (Llama / GPT-2, hidden 256, 4 layers, AdamW fp32), the retained memory
over the activations and logits: 0.76 / 0.89 at 512 x 4, 0.65 / 0.71 at 256 x
4, 0.89 / 0.54 at 128 x 2; with it the total is within 10% of each peak
(tests/preflight/estimate_shape_test.py measures 512 x 4 again).

How it is checked (tests/preflight/estimate_test.py): a tiny Llama (GQA) and
GPT-2 (hidden 256, 4 layers, vocabulary 2048, seq 256 x micro-batch 4, fp32,
AdamW, dropout 0, sdpa attention) each run in a fresh process on the CPU.
After the model is loaded and one small warm-up forward+backward has
initialised the libraries (its gradients dropped), the resident set is the
baseline; the peak (``VmHWM`` reset through ``/proc/self/clear_refs``:
``steps.PeakMemory``, as the preflight step check reads it) is taken over two
optimizer steps of two micro-batches each, so the second step runs with the
optimizer states and the first micro-batch's gradients alive.  Peak minus
baseline is compared with the estimate minus the weights (resident at the
baseline); they must agree within 30%.  The child runs with
``MALLOC_MMAP_THRESHOLD_=65536`` so that glibc hands large freed blocks back
to the OS and the resident set follows the live tensors: with glibc's default
(dynamic) threshold the same steps peak 40-65% higher, memory the allocator
keeps after tensors are freed, which this estimate does not model.  Measured
here: Llama 144 MiB estimated / 154 MiB measured, GPT-2 184 / 193, Llama with
activation checkpointing 92 / 79.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ftmanifest.adapter.architecture import (
    LoraFacts,
    check_targets,
    expected_tensors,
    is_transposed,
    with_tied_head,
)
from ftmanifest.findings import Finding
from ftmanifest.manifest.model import Manifest
from ftmanifest.manifest.training import FullMethod, PeftMethod
from ftmanifest.preflight.shapes import FUSED_ACTIVATIONS, Architecture, numel

PRECISION_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 2}
STATE_BYTES = {"fp32": 4, "bf16": 2, "8bit": 1}
SHARDED = {"none": (), "ddp": (), "zero1": ("optimizer",), "zero2": ("optimizer", "gradients"),
           "zero3": ("optimizer", "gradients", "weights"),
           "fsdp": ("optimizer", "gradients", "weights")}  # fmt: skip
DEFAULT_OPTIMIZER = "adamw_torch"  # transformers' Trainer default
# what each allocator setting counts (the estimate's output says which it assumes)
ALLOCATORS = {
    "exact": "live tensors only (host malloc with MALLOC_MMAP_THRESHOLD_ fixed)",
    "glibc-dynamic": "host memory under glibc's default malloc (dynamic mmap threshold), "
    "with what it keeps resident after tensors are freed; with MALLOC_MMAP_THRESHOLD_=65536 "
    "subtract the allocator row",
    "device": "device memory as torch.cuda.max_memory_allocated counts it (live tensors; "
    "the caching allocator reserves more)",
    "not-modelled": "live tensors only: this host's allocator is not modelled (not glibc), "
    "expect more resident memory",
}
RETAINED_FRACTION = 0.75  # fitted: module docstring, "Which allocator"
MMAP_THRESHOLD_MAX = 32 * 2**20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
# peft's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING, for target_modules: null
DEFAULT_LORA_TARGETS = {"llama": ["q_proj", "v_proj"], "mistral": ["q_proj", "v_proj"],
                        "qwen2": ["q_proj", "v_proj"], "qwen3": ["q_proj", "v_proj"],
                        "gpt2": ["c_attn"]}  # fmt: skip


@dataclass(frozen=True)
class Setup:
    """What one step is: the manifest's sizing, method, optimizer and strategy."""

    seq_len: int
    micro_batch: int
    precision: str = "fp32"
    checkpointing: bool = False
    method: str = "full"  # full | lora | peft
    lora: Any = None  # adapter.architecture.LoraFacts for LoRA
    frozen_modules: tuple[str, ...] = ()
    trainable_override: int | None = None  # peft methods other than LoRA
    optimizer: str = DEFAULT_OPTIMIZER
    state_precision: str = "fp32"
    strategy: str = "none"
    world_size: int = 1
    attention: str = "sdpa"  # or eager (keeps the s*s attention probabilities)
    offload_optimizer: bool = False
    allocator: str = "exact"  # exact | glibc-dynamic | device | not-modelled (ALLOCATORS)


@dataclass(frozen=True)
class Part:
    """One row of the breakdown."""

    name: str
    bytes: int
    formula: str
    sharded: bool = False


@dataclass(frozen=True)
class Measured:
    """A preflight step's measured peak beside the estimate for the shape it ran."""

    measured: int | None
    estimate: int | None  # the estimate for seq_len x micro_batch under ``allocator``
    seq_len: int | None = None
    micro_batch: int | None = None
    allocator: str | None = None
    why_not: str | None = None  # why nothing is compared

    @property
    def error(self) -> float | None:
        """(estimate - measured) / measured, on the same shape and allocator."""
        if not self.measured or self.estimate is None:
            return None
        return (self.estimate - self.measured) / self.measured


@dataclass(frozen=True)
class Estimate:
    setup: Setup
    params: int
    trainable: int
    parts: tuple[Part, ...]
    notes: tuple[str, ...] = ()
    measured: int | None = None
    comparison: Measured | None = None

    @property
    def total(self) -> int:
        return sum(p.bytes for p in self.parts)

    def part(self, name: str) -> int:
        return sum(p.bytes for p in self.parts if p.name == name)

    @property
    def error(self) -> float | None:
        """(estimate - measured) / measured, when a measured peak is known: against
        the estimate for the measured shape when the comparison says it."""
        if self.comparison is not None:
            return self.comparison.error
        if not self.measured:
            return None
        return (self.total - self.measured) / self.measured

    def to_dict(self) -> dict[str, Any]:
        c = self.comparison
        shape = None
        if c is not None and c.seq_len is not None:
            shape = {"seq_len": c.seq_len, "micro_batch": c.micro_batch}
        return {
            "params": self.params, "trainable": self.trainable, "total_bytes": self.total,
            "allocator": self.setup.allocator, "assumes": ALLOCATORS.get(self.setup.allocator),
            "parts": [{"name": p.name, "bytes": p.bytes, "formula": p.formula,
                       "sharded": p.sharded} for p in self.parts],
            "notes": list(self.notes), "measured_bytes": self.measured, "error": self.error,
            "measured_shape": shape, "compared_bytes": None if c is None else c.estimate,
            "measured_allocator": None if c is None else c.allocator,
            "not_compared": None if c is None else c.why_not,
        }  # fmt: skip


@dataclass(frozen=True)
class Lever:
    """One way to need less memory, with the estimate it gives."""

    name: str
    change: str
    estimate: Estimate | None  # None: not computable from this config
    effect: int | None  # estimate.total - the base total (negative: saves)


def with_measured(
    estimate: Estimate, measured_bytes: int | None, comparison: Measured | None = None
) -> Estimate:
    """``estimate`` beside a measured peak (a preflight record's step row) and,
    when known, the estimate for the shape that step ran."""
    return replace(estimate, measured=measured_bytes, comparison=comparison)


def host_allocator(environ: Mapping[str, str], backend: str | None, libc: str) -> str:
    """Which ``ALLOCATORS`` entry a step on ``backend`` (``cpu``, ``cuda``...,
    None: the host) sees, with ``environ`` and the C library (``platform.libc_ver``)."""
    if backend in ("cuda", "rocm"):
        return "device"
    if backend not in (None, "cpu") or libc != "glibc":
        return "not-modelled"
    tunables = environ.get("GLIBC_TUNABLES", "")
    if environ.get("MALLOC_MMAP_THRESHOLD_") or "glibc.malloc.mmap_threshold" in tunables:
        return "exact"  # a fixed threshold: large freed blocks go back to the OS
    return "glibc-dynamic"


def trainable_shapes(arch: Architecture, setup: Setup) -> dict[str, tuple[int, ...]]:
    """The trained tensors: LoRA's (``adapter.architecture``'s peft rules),
    or every parameter outside ``frozen_modules``."""
    if setup.method == "lora":
        config = {"model_type": arch.model_type, "tie_word_embeddings": arch.tied}
        full = with_tied_head(arch.dtype_shapes(), config)
        facts = setup.lora
        if facts.target_modules is None:
            facts = replace(facts, target_modules=DEFAULT_LORA_TARGETS.get(arch.model_type))
        out = expected_tensors(full, facts, transposed=is_transposed(config, facts))
        return {n: s for n, s in out.items() if not n.endswith(".base_layer.weight")}
    return {n: s for n, s in arch.shapes.items()
            if not any(_within(n, m) for m in setup.frozen_modules)}  # fmt: skip


def lora_problems(arch: Architecture, setup: Setup, path: str | None = None) -> list[Finding]:
    """LoRA targets or modules_to_save that name no module of ``arch`` (peft's rules)."""
    if setup.method != "lora" or setup.lora is None or setup.lora.target_modules is None:
        return []
    config = {"model_type": arch.model_type, "tie_word_embeddings": arch.tied}
    return check_targets(with_tied_head(arch.dtype_shapes(), config), setup.lora, path=path)


def _within(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".") or f".{module}." in f".{name}"


def _optimizer(setup: Setup, shapes: dict[str, tuple[int, ...]]) -> tuple[int, str, str | None]:
    """(state elements, description, note) of the optimizer over ``shapes``."""
    name = setup.optimizer.lower()
    n = sum(numel(s) for s in shapes.values())
    if "adafactor" in name:
        count = sum(s[0] + s[1] if len(s) == 2 else numel(s) for s in shapes.values())
        return count, "Adafactor: rows + columns per matrix", None
    if "adam" in name:
        return 2 * n, "2 states (AdamW)", None
    if "sgd" in name:
        if "momentum" in name or "nesterov" in name:
            return n, "1 state (SGD momentum)", None
        return 0, "no state (SGD)", None
    for one in ("lion", "rmsprop", "adagrad"):
        if one in name:
            return n, f"1 state ({one})", None
    return 2 * n, "2 states", f"unknown optimizer {setup.optimizer!r}: counted as AdamW"


def _activations(arch: Architecture, setup: Setup, p: int) -> tuple[int, int, str]:
    """(all layers' saved bytes, one layer's, formula) for one micro-batch."""
    h, kv, i = arch.hidden, arch.kv_dim, arch.intermediate
    tokens = setup.seq_len * setup.micro_batch
    if arch.gated_mlp:
        mlp, mlp_text = 4 * i, "4i"
    elif arch.activation in FUSED_ACTIVATIONS:
        mlp, mlp_text = 2 * i, "2i"
    else:
        mlp, mlp_text = 5 * i, "5i"
    elements = 7 * h + 2 * kv + mlp
    if setup.attention == "eager":
        elements += arch.heads * setup.seq_len
    per_layer = tokens * elements * p
    if arch.hidden_dropout > 0:
        per_layer += tokens * 2 * h  # 1-byte masks after attention and MLP
    if setup.method == "lora" and setup.lora is not None:
        per_layer += tokens * _lora_extra(arch, setup, p) // max(arch.layers, 1)
    text = f"s*b*L*(7h + 2kv + {mlp_text})*p"
    return per_layer * arch.layers, per_layer, text


def _lora_extra(arch: Architecture, setup: Setup, p: int) -> int:
    """Bytes per token LoRA keeps for backward, over every wrapped module."""
    extra = 0
    for name, shape in trainable_shapes(arch, setup).items():
        if name.endswith("lora_A.weight"):
            r, fan_in = shape
            extra += r * p + ((fan_in * p + fan_in) if setup.lora.dropout > 0 else 0)
    return extra


def estimate(arch: Architecture, setup: Setup) -> Estimate:
    """The memory of one training step of ``arch`` as ``setup`` runs it, per process."""
    p = PRECISION_BYTES.get(setup.precision, 4)
    mixed = p < 4
    shapes = trainable_shapes(arch, setup)
    if setup.trainable_override:  # a peft method other than LoRA: its declared count
        shapes = {"(peft parameters)": (setup.trainable_override,)}
    trainable = sum(numel(s) for s in shapes.values())
    sharded = SHARDED.get(setup.strategy, ())
    n = max(setup.world_size, 1)
    notes: list[str] = []
    parts: list[Part] = []

    def add(name: str, value: int, formula: str, kind: str | None = None) -> None:
        shard = kind in sharded and n > 1
        parts.append(Part(name, -(-value // n) if shard else value,
                          formula + (f" / {n}" if shard else ""), shard))  # fmt: skip

    if setup.method == "full":
        add("weights", arch.params * 4, f"{arch.params:,} params x 4 (fp32 master)", "weights")
        if mixed:
            add("weights (autocast copies)", arch.params * p, f"params x {p}", "weights")
    else:
        frozen = arch.params
        add("weights", frozen * p, f"{frozen:,} frozen params x {p}", "weights")
        add("adapter weights", trainable * 4, f"{trainable:,} trainable x 4", "weights")
    if "weights" in sharded and n > 1:
        biggest = arch.params // max(arch.layers, 1)
        parts.append(Part("gathered layer", biggest * 4, "one layer's weights, unsharded"))
    add("gradients", trainable * 4, f"{trainable:,} trainable x 4", "gradients")
    if setup.strategy == "ddp":
        add("DDP gradient buckets", trainable * 4, "a second copy of the gradients")
    states, what, note = _optimizer(setup, shapes)
    if note:
        notes.append(note)
    eight = setup.state_precision == "8bit" or "8bit" in setup.optimizer.lower()
    sb = 1 if eight else STATE_BYTES.get(setup.state_precision, 4)
    state_bytes = states * sb + (states // 256 * 4 if eight else 0)
    if setup.offload_optimizer:
        notes.append(f"optimizer states ({state_bytes:,} bytes) offloaded to host memory")
        state_bytes = 0
    add("optimizer states", state_bytes, f"{what} x {sb} bytes", "optimizer")
    layers_bytes, one_layer, text = _activations(arch, setup, p)
    if setup.checkpointing:
        kept = setup.seq_len * setup.micro_batch * arch.hidden * p * arch.layers
        add("activations (checkpointed)", kept + one_layer, "s*b*L*h*p + one layer recomputed")
    else:
        add("activations", layers_bytes, text)
    tokens = setup.seq_len * setup.micro_batch
    add("logits and loss", tokens * arch.vocab * (p + 8), "s*b*V*(p + 8)")
    if setup.allocator == "glibc-dynamic":
        add("allocator retention (glibc malloc)", _retained(arch, setup, p),
            f"{RETAINED_FRACTION} x saved tensors of at most 32 MiB each")  # fmt: skip
    return Estimate(setup, arch.params, trainable, tuple(parts), tuple(notes))


def _retained(arch: Architecture, setup: Setup, p: int) -> int:
    """What glibc's heap keeps resident after the step's tensors are freed:
    the share of the activations and logits in tensors below its mmap threshold."""
    tokens = setup.seq_len * setup.micro_batch

    def small(widths: list[tuple[int, int]]) -> int:
        sizes = (tokens * w * b for w, b in widths)
        return sum(n for n in sizes if n <= MMAP_THRESHOLD_MAX)

    mlp = 4 if arch.gated_mlp else (2 if arch.activation in FUSED_ACTIVATIONS else 5)
    widths = [(arch.hidden, p)] * 7 + [(arch.kv_dim, p)] * 2 + [(arch.intermediate, p)] * mlp
    if setup.attention == "eager":
        widths.append((arch.heads * setup.seq_len, p))
    if setup.checkpointing:  # each layer's input kept, one layer recomputed
        layers = arch.layers * small([(arch.hidden, p)]) + small(widths)
    else:
        layers = arch.layers * small(widths)
    logits = small([(arch.vocab, p), (arch.vocab, 4), (arch.vocab, 4)])
    return int(RETAINED_FRACTION * (layers + logits))


def levers(arch: Architecture, setup: Setup) -> list[Lever]:
    """The method's levers, in its order, each recomputed with the lever applied."""
    base = estimate(arch, setup).total
    out: list[Lever] = []

    def lever(name: str, change: str, new: Setup) -> None:
        est = estimate(arch, new)
        out.append(Lever(name, change, est, est.total - base))

    if setup.method == "full":
        facts = LoraFacts(r=16, alpha=32, target_modules="all-linear")
        lever("adapter", "LoRA r=16 on all linear layers instead of full fine-tuning",
              replace(setup, method="lora", lora=facts, frozen_modules=()))  # fmt: skip
    out.append(Lever("smaller checkpoint", "a smaller model of the family (estimate it from "
                     "its own config.json)", None, None))  # fmt: skip
    if setup.seq_len > 1:
        lever("shorter sequences", f"seq_len {setup.seq_len} -> {setup.seq_len // 2}",
              replace(setup, seq_len=setup.seq_len // 2))  # fmt: skip
    if setup.micro_batch > 1:
        lever("smaller micro-batch", f"micro_batch {setup.micro_batch} -> "
              f"{setup.micro_batch // 2} (double grad_accum to keep the step's tokens)",
              replace(setup, micro_batch=setup.micro_batch // 2))  # fmt: skip
    if PRECISION_BYTES.get(setup.precision, 4) == 4:
        lever("mixed precision", f"precision {setup.precision} -> bf16",
              replace(setup, precision="bf16"))  # fmt: skip
    if not setup.checkpointing:
        lever("activation checkpointing", "recompute each layer in the backward pass",
              replace(setup, checkpointing=True))  # fmt: skip
    if not setup.offload_optimizer:
        lever("offload (only after measuring)", "optimizer states to host memory; measure "
              "first: ftmanifest preflight M --only step",
              replace(setup, offload_optimizer=True))  # fmt: skip
    return out


def setup_from_manifest(manifest: Manifest, *, seq_len: int, micro_batch: int) -> Setup:
    """The ``Setup`` a manifest declares (``seq_len``/``micro_batch`` resolved by the caller)."""
    t, m, d = manifest.training, manifest.method, manifest.distributed
    opt = t.optimizer if t is not None else None
    kind = m.kind if m is not None else "full"
    return Setup(
        seq_len=seq_len,
        micro_batch=micro_batch,
        precision=(t.precision if t is not None else None) or "fp32",
        checkpointing=bool(t is not None and t.activation_checkpointing),
        method=kind,
        lora=LoraFacts.from_method(m) if kind == "lora" else None,
        frozen_modules=tuple(m.frozen_modules) if isinstance(m, FullMethod) else (),
        trainable_override=m.trainable_params if isinstance(m, PeftMethod) else None,
        optimizer=opt.name if opt is not None else DEFAULT_OPTIMIZER,
        state_precision=opt.state_precision if opt is not None else "fp32",
        strategy=d.strategy if d is not None else "none",
        world_size=d.world_size if d is not None else 1,
    )
