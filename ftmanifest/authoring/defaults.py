"""What each training tool uses for a key its config leaves out, and where it says so.

Layer: edges - authoring (data only).  A config that leaves a key out runs with the
tool's documented default; ``init`` writes that value commented "default of
<tool> <file> <key>", never a value of its own choosing.  A default that
depends on the machine that trains (transformers' ``optim``: ``adamw_torch_fused``
with torch >= 2.8, ``adamw_torch`` below) is no default here: it stays a FILL.

transformers and TRL are dependencies, and a test compares these values with
the installed sources' dataclass defaults.  axolotl and LLaMA-Factory are not;
their values were read from their sources at the commits ``keys`` names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Default:
    """A tool's default for one key: the value, and the tool and file that set it."""

    value: Any
    tool: str
    where: str  # file and key, e.g. "training_args.py seed"


def _table(tool: str, file: str, values: dict[str, Any]) -> dict[str, Default]:
    return {key: Default(value, tool, f"{file} {key}") for key, value in values.items()}


# transformers TrainingArguments (training_args.py), 4.5x and 5.x alike.
TRAINER = _table(
    "transformers TrainingArguments",
    "training_args.py",
    {
        "seed": 42,
        "learning_rate": 5e-5,
        "weight_decay": 0.0,
        "lr_scheduler_type": "linear",
        "warmup_steps": 0,
        "gradient_accumulation_steps": 1,
        "per_device_train_batch_size": 8,
        "num_train_epochs": 3.0,
        "max_grad_norm": 1.0,
        "bf16": False,
        "fp16": False,
        "activation_checkpointing": False,  # 5.x's name; 4.x's gradient_checkpointing: False
    },
)
# TRL 1.x: _BaseConfig (trainer/base_config.py) under SFTConfig and DPOConfig.
TRL_BASE = _table(
    "trl",
    "trainer/base_config.py",
    {"gradient_checkpointing": True, "bf16": True},  # bf16: True unless fp16 is set
)
TRL_SFT = _table(
    "trl SFTConfig",
    "trainer/sft_config.py",
    {"learning_rate": 2e-5, "max_length": 1024, "packing": False},
)
TRL_DPO = _table(
    "trl DPOConfig",
    "trainer/dpo_config.py",
    {"learning_rate": 1e-6, "max_length": 1024, "beta": 0.1, "loss_type": ["sigmoid"]},
)
# TRL ModelConfig (trainer/model_config.py): the model and LoRA keys of `trl sft --config`.
TRL_MODEL = _table(
    "trl ModelConfig",
    "trainer/model_config.py",
    {
        "model_revision": "main",
        "use_peft": False,
        "lora_r": 16,
        "lora_alpha": 32,
        "lora_dropout": 0.05,
    },
)
# LLaMA-Factory (src/llamafactory/hparams): its own keys; the rest are TrainingArguments'.
LLAMAFACTORY = {
    **_table(
        "LLaMA-Factory",
        "hparams/finetuning_args.py",
        {
            "stage": "sft",
            "finetuning_type": "lora",
            "lora_rank": 8,
            "lora_dropout": 0.0,
            "lora_target": "all",
            "pref_beta": 0.1,
            "pref_loss": "sigmoid",
        },
    ),
    **_table(
        "LLaMA-Factory",
        "hparams/data_args.py",
        {"cutoff_len": 2048, "train_on_prompt": False, "dataset_dir": "data"},
    ),
}
# lora_alpha: None, which FinetuningArguments.__post_init__ turns into lora_rank * 2.
LLAMAFACTORY_ALPHA = Default(None, "LLaMA-Factory", "hparams/finetuning_args.py lora_alpha")
# axolotl (src/axolotl/utils/schemas): training.py, config.py, peft.py; seed in validation.py.
AXOLOTL = {
    **_table(
        "axolotl",
        "utils/schemas/training.py",
        {
            "gradient_accumulation_steps": 1,
            "micro_batch_size": 1,
            "num_epochs": 1.0,
            "optimizer": "adamw_torch_fused",
            "lr_scheduler": "cosine",
            "weight_decay": 0.0,
            "train_on_inputs": False,
        },
    ),
    **_table(
        "axolotl",
        "utils/schemas/config.py",
        {"sequence_len": 512, "gradient_checkpointing": False, "sample_packing": False},
    ),
    **_table("axolotl", "utils/schemas/peft.py", {"lora_dropout": 0.0}),
    **_table("axolotl", "utils/schemas/validation.py (set_default_seed)", {"seed": 42}),
}
OPTIM_FILL = (
    "the optimizer: {tool} sets no optim, so transformers' TrainingArguments default runs, "
    "adamw_torch_fused with torch >= 2.8 and adamw_torch below (training_args.py optim)"
)
