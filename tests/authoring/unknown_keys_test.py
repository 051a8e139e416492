"""A key a source reader does not know is a note naming the file: never dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.authoring.conftest import init_from


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("axolotl.yml", "base_model: org/tiny\nadapter: lora\nlora_rr: 8\n"),
        ("lf.yaml", "model_name_or_path: org/tiny\nstage: sft\nlora_rnk: 8\n"),
        (
            "args.json",
            json.dumps({"output_dir": "o", "per_device_train_batch_size": 1, "lora_rr": 8}),
        ),  # fmt: skip
        ("adapter_config.json", json.dumps({"peft_type": "LORA", "r": 8, "lora_rr": 8})),
    ],
)
def test_an_unknown_key_is_a_note_naming_the_file(
    hub: dict[str, str], project: Path, capsys: pytest.CaptureFixture[str], name: str, text: str
) -> None:
    source = project / name
    source.write_text(text)
    rc, payload, err = init_from(capsys, project / "exp.yaml", source)
    assert rc == 0, err
    unknown = [n for n in payload["notes"] if "unknown" in n]
    assert len(unknown) == 1 and unknown[0].split(": ")[0].endswith(name)
    assert ("lora_rr" in unknown[0]) or ("lora_rnk" in unknown[0])
    assert f"{name}: unknown" in err and "note: " in err


def test_an_unknown_dataset_key_is_a_note(
    hub: dict[str, str], project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = project / "axolotl.yml"
    source.write_text("base_model: org/tiny\ndatasets:\n  - path: data/train.jsonl\n    tpye: x\n")
    rc, payload, err = init_from(capsys, project / "exp.yaml", source)
    assert rc == 0 and any("'tpye'" in n and n.startswith("axolotl.yml") for n in payload["notes"])


def test_keys_axolotl_documents_are_known_and_a_misspelt_one_is_not(
    hub: dict[str, str], project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Keys of axolotl's config schema (its examples use them) are never called typos."""
    source = project / "axolotl.yml"
    documented = (
        "base_model: org/tiny\nmodel_revision: main\nattn_implementation: flash_attention_2\n"
        "gradient_checkpointing: true\ngradient_checkpointing_kwargs:\n  use_reentrant: false\n"
        "eval_sample_packing: true\nloss_watchdog_threshold: 5.0\nrl: dpo\n"
        "datasets:\n  - path: data/train.jsonl\n    type: chat_template.default\n"
        "    field_chosen: chosen\n    field_rejected: rejected\n"
    )
    source.write_text(documented)
    rc, payload, err = init_from(capsys, project / "exp.yaml", source)
    assert rc == 0, err
    assert not [n for n in payload["notes"] if "unknown" in n], payload["notes"]
    assert {d["field"]: d["value"] for d in payload["derived"]}[
        "model.attn_implementation"
    ] == "flash_attention_2"
    source.write_text(
        documented.replace("gradient_checkpointing_kwargs", "gradient_checkpoint_kwargs")
    )
    rc, payload, err = init_from(capsys, project / "exp.yaml", source)
    assert rc == 0 and any("'gradient_checkpoint_kwargs'" in n for n in payload["notes"])
