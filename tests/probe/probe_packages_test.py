"""Installed distributions: PEP 503 names, versions as found, nothing imported."""

from __future__ import annotations

from importlib import metadata

import pytest

from ftmanifest.probe import packages


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("PyYAML", "pyyaml"),
        ("ruamel.yaml", "ruamel-yaml"),
        ("nvidia_cudnn_cu12", "nvidia-cudnn-cu12"),
        ("zope.interface", "zope-interface"),
        ("Foo__Bar-._baz", "foo-bar-baz"),
        ("torch", "torch"),
    ],
)
def test_pep503_normalisation(raw, normal):
    assert packages.normalize_name(raw) == normal


def test_first_distribution_on_the_path_wins_and_broken_ones_are_skipped():
    found = packages.collect(
        [("Foo_Bar", "2.0"), ("foo.bar", "1.0"), (None, "3"), ("nover", None), ("Zed", "0.1")]
    )
    assert found == {"foo-bar": "2.0", "zed": "0.1"}


def test_real_installed_versions_as_metadata_reports_them():
    found = packages.installed_distributions()
    for name in ("torch", "transformers", "peft", "pydantic", "ruamel.yaml"):
        assert found[packages.normalize_name(name)] == metadata.version(name)
    assert all(name == packages.normalize_name(name) for name in found)
