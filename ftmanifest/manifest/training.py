"""The ``seeds``, ``method``, ``training`` and ``distributed`` sections.

Layer: pure core - manifest (pure).  Requirements digest items 4 (trained parameters)
and 5 (one full step, sized).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from ftmanifest.manifest.types import Digest, NonEmpty, NonNegativeInt, PositiveInt, Strict

LayerRange = Annotated[list[NonNegativeInt], Field(min_length=2, max_length=2)]
Precision = Literal["fp32", "tf32", "fp16", "bf16", "fp8"]


class Seeds(Strict):
    """Every source of randomness, and the determinism switches."""

    python: NonNegativeInt | None = Field(default=None, description="random.seed value.")
    numpy: NonNegativeInt | None = Field(default=None, description="numpy.random.seed value.")
    torch: NonNegativeInt | None = Field(default=None, description="torch.manual_seed value.")
    data_order: NonNegativeInt | None = Field(
        default=None, description="Seed of the data loader's shuffling."
    )
    deterministic: bool = Field(
        default=False, description="torch.use_deterministic_algorithms(True)."
    )
    cudnn_benchmark: bool = Field(
        default=False, description="torch.backends.cudnn.benchmark (off for reproducibility)."
    )


class FullMethod(Strict):
    """Full fine-tuning: every parameter (or all but frozen ones) is trained."""

    kind: Literal["full"] = Field(description="Method type.")
    trainable_params: PositiveInt | None = Field(default=None, description="Trained parameters.")
    frozen_modules: list[NonEmpty] = Field(
        default_factory=list, description="Module names kept frozen."
    )


class InitAdapter(Strict):
    """The adapter a LoRA run starts from (a warm start), pinned by its weights file."""

    path: NonEmpty = Field(
        description="The adapter's weights file (adapter_model.safetensors), relative to the "
        "manifest's folder."
    )
    digest: Digest = Field(description="sha256 digest of that file.")


class LoraMethod(Strict):
    """LoRA adapter; the rank is part of the compared configuration."""

    kind: Literal["lora"] = Field(description="Method type.")
    r: PositiveInt = Field(description="LoRA rank.")
    alpha: float = Field(gt=0, description="LoRA alpha (scaling numerator).")
    dropout: float = Field(default=0.0, ge=0, lt=1, description="Dropout on the LoRA input.")
    target_modules: list[NonEmpty] | str | None = Field(
        default=None,
        description="Modules the adapter wraps: names (a module matches when its name is the "
        "entry or ends with '.' + entry), 'all-linear', or a regular expression matched "
        "against the whole module name, as peft reads it.",
    )
    exclude_modules: list[NonEmpty] | str | None = Field(
        default=None, description="Modules never wrapped: names or a regular expression."
    )
    rank_pattern: dict[NonEmpty, PositiveInt] = Field(
        default_factory=dict,
        description="Rank per module name or regular expression, overriding r (peft's).",
    )
    alpha_pattern: dict[NonEmpty, float] = Field(
        default_factory=dict,
        description="Alpha per module name or regular expression, overriding alpha (peft's).",
    )
    init: bool | NonEmpty = Field(
        default=True,
        description="peft's init_lora_weights: true (B = 0), 'gaussian', 'olora', 'pissa', "
        "'eva', 'loftq'... (OLoRA and PiSSA rewrite the base weights).",
    )
    init_adapter: InitAdapter | None = Field(
        default=None,
        description="The adapter training starts from: every LoRA tensor before step 1 must "
        "equal this file's (unset: a fresh adapter, as init makes it).",
    )
    layer_replication: list[LayerRange] | None = Field(
        default=None, description="peft's layer_replication: [start, end) ranges of layers."
    )
    fan_in_fan_out: bool = Field(
        default=False, description="The wrapped layers store weights as (fan_in, fan_out)."
    )
    modules_to_save: list[NonEmpty] = Field(
        default_factory=list, description="Extra modules trained in full and saved."
    )
    bias: Literal["none", "all", "lora_only"] = Field(
        default="none", description="Which biases are trained."
    )
    use_rslora: bool = Field(default=False, description="Rank-stabilised scaling.")
    use_dora: bool = Field(default=False, description="Weight-decomposed LoRA (DoRA).")
    trainable_params: PositiveInt | None = Field(default=None, description="Trained parameters.")


class PeftMethod(Strict):
    """Any other PEFT method, by its peft type and its configuration."""

    kind: Literal["peft"] = Field(description="Method type.")
    peft_type: NonEmpty = Field(description="peft's PeftType name, e.g. IA3, PREFIX_TUNING.")
    config: dict[str, Any] = Field(default_factory=dict, description="The method's config.")
    trainable_params: PositiveInt | None = Field(default=None, description="Trained parameters.")


Method = Annotated[FullMethod | LoraMethod | PeftMethod, Field(discriminator="kind")]


class Optimizer(Strict):
    """Optimizer and the precision of its state."""

    name: NonEmpty = Field(description="Optimizer, e.g. adamw_torch, adafactor.")
    lr: float = Field(gt=0, description="Peak learning rate.")
    weight_decay: float = Field(default=0.0, ge=0, description="Weight decay.")
    schedule: str | None = Field(default=None, description="LR schedule, e.g. cosine.")
    warmup_steps: NonNegativeInt = Field(default=0, description="Warm-up steps.")
    state_precision: Literal["fp32", "bf16", "8bit"] = Field(
        default="fp32", description="Precision of optimizer state."
    )
    betas: Annotated[list[float], Field(min_length=2, max_length=2)] | None = Field(
        default=None, description="Adam betas (beta1, beta2), when pinned."
    )
    eps: float | None = Field(default=None, gt=0, description="Adam epsilon, when pinned.")


class Packing(Strict):
    """Packing several examples in one sequence, and how attention is masked."""

    enabled: bool = Field(default=False, description="Examples are packed.")
    mask_policy: Literal["block-diagonal", "none"] | None = Field(
        default=None, description="block-diagonal keeps packed examples from attending each other."
    )


ObjectiveKind = Literal["trainer", "sft", "dpo", "orpo", "kto", "cpo", "reward", "grpo", "rloo"]


class Objective(Strict):
    """What the loss optimises: the model's own loss, SFT, or a preference/RL objective."""

    kind: ObjectiveKind = Field(
        description="trainer (transformers.Trainer, the model's own loss), sft, dpo, orpo, kto, "
        "cpo, reward, grpo, rloo (TRL's trainers)."
    )
    beta: float | None = Field(
        default=None, ge=0, description="The objective's beta (DPO, ORPO, KTO, CPO, GRPO)."
    )
    loss_type: str | list[NonEmpty] | None = Field(
        default=None, description="TRL's loss_type (e.g. sigmoid, ipo, nll, dapo)."
    )
    params: dict[NonEmpty, Any] = Field(
        default_factory=dict,
        description="Other parameters of the objective, by the TRL config's field names "
        "(e.g. label_smoothing, desirable_weight); each is compared with the trainer's.",
    )


class Training(Strict):
    """Step sizing: what one optimizer step is."""

    seq_len: PositiveInt | None = Field(default=None, description="Representative sequence length.")
    micro_batch: PositiveInt | None = Field(default=None, description="Sequences per device step.")
    grad_accum: PositiveInt | None = Field(
        default=None, description="Micro-batches accumulated per optimizer step."
    )
    loss_normalization: Literal["per-token", "per-sequence"] | None = Field(
        default=None, description="How the accumulated loss is normalised."
    )
    loss_on: Literal["completion", "all"] | None = Field(
        default=None, description="Which positions carry loss."
    )
    precision: Precision | None = Field(default=None, description="Compute precision.")
    objective: Objective | None = Field(
        default=None,
        description="The training objective; absent means supervised next-token loss "
        "(transformers.Trainer or TRL's SFTTrainer).",
    )
    max_grad_norm: float | None = Field(
        default=None, ge=0, description="Gradient clipping norm, when pinned (0: no clipping)."
    )
    activation_checkpointing: bool = Field(
        default=False, description="Recompute activations in the backward pass."
    )
    optimizer: Optimizer | None = Field(default=None, description="Optimizer settings.")
    packing: Packing = Field(default_factory=Packing, description="Sequence packing.")
    max_steps: PositiveInt | None = Field(default=None, description="Optimizer steps to run.")
    epochs: float | None = Field(default=None, gt=0, description="Epochs, when not max_steps.")
    options: dict[NonEmpty, Any] = Field(
        default_factory=dict,
        description="Other Trainer or TRL config options that change training, by the "
        "config's field names (e.g. label_smoothing_factor, neftune_noise_alpha, "
        "train_sampling_strategy, optim_args); each is compared exactly with the trainer's, "
        "and one not at its default and not pinned refuses the run.",
    )


class Distributed(Strict):
    """How the work is spread over processes."""

    strategy: Literal["none", "ddp", "fsdp", "zero1", "zero2", "zero3"] = Field(
        default="none", description="DDP replicates the model; FSDP/ZeRO shard state."
    )
    world_size: PositiveInt = Field(default=1, description="Total processes.")
    nodes: PositiveInt = Field(default=1, description="Machines.")
