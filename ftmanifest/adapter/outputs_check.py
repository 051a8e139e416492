"""Judge the tokenizer and generation settings an adapter meets: findings only.

Layer: judging rooms - judging core over ``outputs`` (which reads the files).  Rules:

  adapter.tokenizer-differs        the adapter folder ships a tokenizer whose facts
                                   (vocabulary, special tokens, chat template...) are not
                                   the base's: other token ids, other logits
  adapter.generation-differs       the adapter folder's generation_config.json is not the base's
  adapter.base-tokenizer-differs   the base's tokenizer is not the one bound (a fact differs)
  adapter.base-generation-differs  the base's generation_config.json is not the one bound
  adapter.tokenizer-unreadable     a tokenizer file cannot be read or parsed
  adapter.base-tokenizer-resaved   (warning) the base's tokenizer files changed, their facts did not
  adapter.binding-outdated         (warning) a binding written before tokenizer and
                                   generation_config.json were bound: not checked, bind again
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ftmanifest.adapter import outputs as out
from ftmanifest.adapter.architecture import collapse, finding
from ftmanifest.adapter.loadable import CONFIG_INFORMATIONAL
from ftmanifest.findings import Finding

REBIND = "bind it again to cover them: ftmanifest bind ADAPTER --manifest M --key KEY"


def adapter_outputs_findings(adapter_dir: Path, base_folder: Path) -> list[Finding]:
    """A tokenizer or generation_config.json shipped in the adapter folder is the base's."""
    found: list[Finding] = []
    mine, bad = out.read_or_finding(adapter_dir, "adapter folder's")
    found += bad
    if mine is not None and mine.files:
        theirs, bad = out.read_or_finding(base_folder, "base's")
        found += bad
        if theirs is not None:
            found += _tokenizer_rows(mine, theirs, adapter_dir, base_folder)
    if (adapter_dir / out.GENERATION_NAME).exists():
        found += _generation_rows(
            out.read_generation(base_folder), out.read_generation(adapter_dir),
            adapter_dir / out.GENERATION_NAME, "generation-differs",
            "the adapter folder's generation_config.json is not the base's at {key}",
            f"remove {out.GENERATION_NAME} from the adapter folder, or copy the base's",
        )  # fmt: skip
    return collapse(found)


def _tokenizer_rows(mine: out.Tokenizer, theirs: out.Tokenizer, adapter_dir: Path,
                    base_folder: Path) -> list[Finding]:  # fmt: skip
    if not theirs.files:
        return [finding(
            "tokenizer-differs", "the adapter folder ships a tokenizer but the base has none "
            "to compare it with", path=str(adapter_dir), field="tokenizer",
            expected=f"no tokenizer files (the base {base_folder} has none)",
            observed=", ".join(sorted(mine.files)),
            hint="remove the tokenizer files from the adapter folder, or bind to a base that "
            "holds the tokenizer the adapter was trained with",
        )]  # fmt: skip
    rows = []
    for key in out.value_differences(theirs.facts, mine.facts):
        source = mine.sources.get(key) or theirs.sources.get(key, "tokenizer")
        rows.append(finding(
            "tokenizer-differs", f"the adapter folder's tokenizer is not the base's at {key}"
            + _vocab_example(key, mine.vocab, theirs.vocab),
            path=str(adapter_dir / source), field=key,
            expected=theirs.facts.get(key, "absent"), observed=mine.facts.get(key, "absent"),
            hint="remove the tokenizer files from the adapter folder (the base's are used), "
            "or copy the base's tokenizer there unchanged",
        ))  # fmt: skip
    return rows


def _vocab_example(key: str, mine: dict[str, int], theirs: dict[str, int]) -> str:
    """`` ('router' is id 7 here, 9 in the base)``: one token that encodes otherwise."""
    if key not in ("vocab", "added_tokens"):
        return ""
    for token in sorted(set(mine) | set(theirs)):
        a, b = mine.get(token), theirs.get(token)
        if a != b:
            here = "absent" if a is None else f"id {a}"
            there = "absent" if b is None else str(b)
            return f" ({token!r} is {here} here, {there} in the base: other token ids)"
    return ""


def bound_outputs_findings(pin: out.OutputsPin | None, base_folder: Path) -> list[Finding]:
    """The base's tokenizer and generation_config.json are the ones ``pin`` bound."""
    if pin is None:
        return [finding(
            "binding-outdated", "the binding predates tokenizer and generation_config.json "
            "binding: the base's tokenizer, generation_config.json and config keys are not "
            "checked against the bound ones", "warning", path=str(base_folder),
            field="base.outputs", expected="a binding that covers the tokenizer and "
            "generation_config.json", observed="not in the binding", hint=REBIND,
        )]  # fmt: skip
    found: list[Finding] = []
    now, bad = out.read_or_finding(base_folder, "base's")
    if now is None:
        return bad
    if now.files != pin.tokenizer_files:
        keys = out.value_differences(pin.tokenizer_facts, now.facts)
        for key in keys:
            source = now.sources.get(key) or "tokenizer"
            found.append(finding(
                "base-tokenizer-differs", f"the base's tokenizer is not the one the adapter "
                f"was bound with at {key} (other token ids or template, other outputs)",
                path=str(base_folder / source), field=key,
                expected=pin.tokenizer_facts.get(key, "absent"),
                observed=now.facts.get(key, "absent"),
                hint=f"restore the base's {source} as it was when bound, or bind again",
            ))  # fmt: skip
        if not keys:
            changed = sorted(n for n in set(pin.tokenizer_files) | set(now.files)
                             if pin.tokenizer_files.get(n) != now.files.get(n))  # fmt: skip
            found.append(finding(
                "base-tokenizer-resaved", "the base's tokenizer files were rewritten, with "
                "the same vocabulary, special tokens and chat template", "warning",
                path=str(base_folder / changed[0]), field=changed[0],
                expected=pin.tokenizer_files.get(changed[0], "absent"),
                observed=now.files.get(changed[0], "absent"),
                hint="nothing to do for loading; bind again to pin the files as they are",
            ))  # fmt: skip
    found += _generation_rows(
        pin.generation, out.read_generation(base_folder), base_folder / out.GENERATION_NAME,
        "base-generation-differs",
        "the base's generation_config.json is not the one the adapter was bound with at {key}",
        f"restore the base's {out.GENERATION_NAME} as it was when bound, or bind again",
    )  # fmt: skip
    return collapse(found)


def _generation_rows(want: dict[str, Any] | None, got: dict[str, Any] | None, path: Path,
                     rule: str, message: str, hint: str) -> list[Finding]:  # fmt: skip
    if want is None and got is None:
        return []
    keys = out.value_differences(want, got)
    if (want is None) != (got is None) and not keys:  # an empty file appeared or vanished
        keys = ["(file)"]
    return [finding(
        rule, message.format(key=key), path=str(path), field=key,
        expected=out.show(want, key) if want is not None else "no generation_config.json",
        observed=out.show(got, key) if got is not None else "no generation_config.json",
        hint=hint,
    ) for key in keys]  # fmt: skip


def config_keys(bound: dict[str, Any] | None, now: dict[str, Any] | None) -> str:
    """`` at rope_theta (10000.0 bound, 20000.0 here)``: the first keys that differ."""
    if bound is None or now is None:
        return ""
    kept = {k: v for k, v in now.items() if k not in CONFIG_INFORMATIONAL}
    keys = out.value_differences(bound, kept)
    shown = ", ".join(f"{k} ({out.show(bound, k)} bound, {out.show(kept, k)} here)"
                      for k in keys[:3])  # fmt: skip
    return f" at {shown}" + (f" and {len(keys) - 3} more" if len(keys) > 3 else "") if keys else ""
