"""The handoff report: JSON, Markdown and self-contained HTML."""

from __future__ import annotations

import argparse
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from ftmanifest.cli import report as report_cli
from ftmanifest.errors import InputError, InputNotFoundError
from ftmanifest.results.charts import category_chart
from ftmanifest.results.report import (
    load_report_data,
    render_html,
    render_markdown,
    write_report,
)
from tests.conftest import run_cli

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
HOSTILE = '<script>alert("x")</script><img src=https://evil.example/p.png>'


def full_data() -> dict[str, Any]:
    """A complete report's data, as audit hands it over."""
    return {
        "manifest": {"path": "exp.yaml", "digest": "sha256:" + "a" * 64},
        "signature": {"trusted": True, "threshold": 1, "signers": ["alice"]},
        "deliverable": {
            "path": "out/adapter",
            "files": [
                {"path": "adapter_model.safetensors", "digest": "sha256:" + "b" * 64, "size": 1234},
                {"path": "adapter_config.json", "digest": "sha256:" + "c" * 64, "size": 456},
            ],
            "binding": {"base_tree_digest": "sha256-tree:" + "d" * 64},
            "config": {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]},
        },
        "model": {
            "repo": "tiny/llama",
            "revision": "0" * 40,
            "tree_digest": "sha256-tree:" + "e" * 64,
            "license": "apache-2.0",
        },
        "environment": {"python": "3.12.1", "torch": "2.4.0"},
        "data": [
            {
                "name": "train",
                "path": "data/train.jsonl",
                "digest": "sha256:" + "f" * 64,
                "records": 120,
                "license": "cc-by-4.0",
            }
        ],
        "comparison": {
            "guards": [
                {"name": "per_category", "verdict": "fail", "detail": "billing dropped 0.12"},
                {"name": "format_validity", "verdict": "pass", "detail": "1.000 >= 0.98"},
            ],
            "per_category": [
                {
                    "category": "billing",
                    "baseline": 0.82,
                    "candidate": 0.70,
                    "max_drop": 0.05,
                    "ci_low": -0.2,
                    "ci_high": -0.04,
                    "verdict": "fail",
                },
                {
                    "category": "shipping",
                    "baseline": 0.75,
                    "candidate": 0.88,
                    "max_drop": 0.05,
                    "ci_low": 0.02,
                    "ci_high": 0.2,
                    "verdict": "pass",
                },
                {
                    "category": "returns",
                    "baseline": 0.6,
                    "candidate": 0.62,
                    "max_drop": 0.05,
                    "verdict": "pass",
                },
            ],
            "changed_examples": {"billing": {"improved": ["ex-1"], "regressed": ["ex-2", "ex-3"]}},
        },
        "findings": [
            {
                "kind": "secret",
                "rule": "FTS001",
                "severity": "error",
                "message": "token in log",
                "path": "logs/train.log",
                "line": 3,
                "column": 1,
                "hint": "remove it",
                "excerpt": "hf_****",
            },
            {
                "kind": "permissions",
                "rule": "FTA010",
                "severity": "warning",
                "message": "world-readable",
                "path": "ckpt/",
                "hint": "ftmanifest audit --fix-perms",
            },
        ],
        "history": {
            "attempts": 3,
            "outcomes": "1 abandoned, 2 completed",
            "sealed split test": "1 use(s) by the experiment's family",
        },
        "limits": "Evaluated on 120 examples only.\nNot tested on long inputs.",
        "verdict": "refused",
    }


def hostile_data() -> dict[str, Any]:
    data = full_data()
    data["deliverable"]["files"][0]["path"] = HOSTILE
    data["findings"][0]["message"] = HOSTILE
    data["findings"][0]["excerpt"] = "</code></td></tr></table><script>x()</script>"
    data["comparison"]["per_category"][0]["category"] = HOSTILE
    data["comparison"]["changed_examples"] = {HOSTILE: {"improved": [HOSTILE], "regressed": []}}
    data["limits"] = "see http://example.com/limits\n<iframe src=//evil></iframe>"
    data["environment"] = {HOSTILE: "\x1b[2J\u202egnp.exe"}
    data["verdict"] = '"><script>'
    return data


class _Collect(HTMLParser):
    """Every tag, every attribute value and the CSS of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str, str]] = []
        self.style = ""
        self.texts: list[str] = []
        self.values: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend((tag, name, value or "") for name, value in attrs)
        self.values.extend(value or "" for _, value in attrs)
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        self.texts.append(data)
        if self._in_style:
            self.style += data


def _parse(html: str) -> _Collect:
    parser = _Collect()
    parser.feed(html)
    parser.close()
    return parser


def _no_external(html: str) -> None:
    page = _parse(html)
    assert not {"script", "iframe", "img", "link", "object", "embed", "base"} & set(page.tags)
    for tag, name, value in page.attrs:
        assert not name.startswith("on"), (tag, name)
        if name in ("src", "href", "srcset", "action", "xlink:href", "style"):
            pytest.fail(f"{tag} has {name}={value!r}")
        if name == "content":  # the one meta that matters: fetch nothing
            assert "http" not in value, value
    assert "url(" not in page.style and "@import" not in page.style and "http" not in page.style
    assert ("meta", "content", _CSP) in page.attrs
    # any "http" left is text the parser read as text, not markup
    assert html.count("http://") + html.count("https://") == sum(
        text.count("http://") + text.count("https://") for text in page.texts + page.values
    )


def _svg(html: str) -> ET.Element:
    match = re.search(r"<svg\b.*?</svg>", html, re.S)
    assert match, "no inline SVG chart"
    return ET.fromstring(match.group())


def test_full_report_writes_three_files_and_the_model_card(tmp_path: Path) -> None:
    paths = write_report(full_data(), tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "README.md",
        "handoff.html",
        "handoff.json",
        "handoff.md",
    ]
    assert json.loads(paths.json.read_text()) == full_data()
    html = paths.html.read_text()
    for text in (
        "REFUSED",
        "adapter_model.safetensors",
        "sha256:" + "b" * 64,
        "tiny/llama",
        "cc-by-4.0",
        "billing",
        "ex-2",
        "token in log",
        "Not tested on long inputs",
        "billing dropped 0.12",
        "0.820",
        "-0.200 to -0.040",
    ):
        assert text in html, text
    assert "not available" not in html
    md = paths.markdown.read_text()
    assert "# Handoff report: REFUSED" in md
    assert "| `adapter_model.safetensors` | `sha256:" + "b" * 64 + "` | 1234 |" in md
    assert "| billing | 0.820 | 0.700 | 0.050 | -0.200 to -0.040 | fail |" in md
    assert "| billing | 1: `ex-1` | 2: `ex-2`, `ex-3` |" in md
    _no_external(html)


def test_minimal_report_says_not_available(tmp_path: Path) -> None:
    paths = write_report({}, tmp_path)
    html = paths.html.read_text()
    assert "UNKNOWN" in html and html.count("not available") >= 8
    assert "<svg" not in html
    assert "_not available_" in paths.markdown.read_text()
    partial = {"verdict": "ready", "comparison": {"guards": []}, "data": "garbage", "findings": [1]}
    html = render_html(partial)
    assert "READY" in html and "The audit found nothing." in html
    assert render_markdown({"comparison": None, "deliverable": {"path": "x"}})


def test_report_is_deterministic() -> None:
    assert render_html(full_data()) == render_html(full_data())
    assert render_markdown(full_data()) == render_markdown(full_data())


def test_hostile_strings_are_escaped(tmp_path: Path) -> None:
    paths = write_report(hostile_data(), tmp_path)
    html = paths.html.read_text()
    _no_external(html)
    assert "<script" not in html and "<iframe" not in html and "<img" not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert "\x1b" not in html and "\u202e" not in html
    assert "\\x1b[2J\\u202egnp.exe" in html
    assert 'class="verdict unknown"' in html
    md = paths.markdown.read_text()
    outside_code = re.sub(r"(`+).*?\1|^> ", "", md, flags=re.M)  # code spans, quotes
    assert not re.search(r"(?<!\\)[<>]", outside_code)  # every < or > escaped
    assert "`<script>alert" in md or "``<script>alert" in md  # or in a code span
    assert "\\<script\\>" in md  # free text: Markdown escapes
    assert "\x1b" not in md
    # the JSON keeps the exact values
    assert json.loads(paths.json.read_text())["deliverable"]["files"][0]["path"] == HOSTILE


def test_markdown_table_cells_cannot_break_out() -> None:
    data = full_data()
    data["deliverable"]["files"][0]["path"] = "a|b`c"
    data["findings"][0]["message"] = "x | y *bold* [link](javascript:z)"
    md = render_markdown(data)
    assert "| ``a\\|b`c`` |" in md
    assert "x \\| y \\*bold\\* \\[link\\](javascript:z)" in md


def test_chart_has_one_bar_per_category_per_side_and_the_tolerance() -> None:
    rows = full_data()["comparison"]["per_category"]
    svg = ET.fromstring(category_chart(rows))
    assert svg.tag == "svg" and svg.get("role") == "img" and svg.get("aria-label")
    assert svg.get("viewBox") == "0 0 720 360"
    assert svg.find("title") is not None
    groups = [g for g in svg.iter("g") if g.get("class") == "category"]
    assert [g.get("data-category") for g in groups] == ["billing", "shipping", "returns"]
    for group in groups:
        classes = [el.get("class") for el in group]
        assert classes.count("bar baseline") == 1 and classes.count("bar candidate") == 1
        assert classes.count("tolerance") == 1
    assert [len([e for e in g if e.get("class") == "ci"]) for g in groups] == [1, 1, 0]
    # tolerance at baseline - max_drop, in the bars' own scale
    billing = groups[0]
    bar = next(e for e in billing if e.get("class") == "bar baseline")
    line = next(e for e in billing if e.get("class") == "tolerance")
    top, height = float(bar.get("y", "")), float(bar.get("height", ""))
    zero, per_unit = top + height, height / 0.82
    assert float(line.get("y1", "")) == pytest.approx(zero - per_unit * 0.77, abs=0.2)
    # the failing candidate is drawn in the failure colour
    cand = next(e for e in billing if e.get("class") == "bar candidate")
    assert cand.get("fill") == "#c0392b"
    assert category_chart(rows) == category_chart(rows)
    assert _svg(render_html(full_data())).get("viewBox") == "0 0 720 360"


def test_chart_tolerates_odd_rows() -> None:
    assert category_chart([]) == "" and category_chart(None) == ""
    assert category_chart([{"category": "x", "baseline": "n/a"}]) == ""
    svg = ET.fromstring(
        category_chart(
            [
                {"category": "big", "baseline": 37, "candidate": 41},
                {"category": "half", "candidate": float("nan")},
                {"category": "only", "baseline": 2},
            ]
        )
    )
    assert len([g for g in svg.iter("g") if g.get("class") == "category"]) == 2
    many = [
        {"category": f"category number {i}", "baseline": 0.5, "candidate": 0.6} for i in range(9)
    ]
    text = category_chart(many)
    assert "rotate(-35" in text and "\u2026" in text


def test_cli_renders_a_saved_audit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    audit = tmp_path / "audit.json"
    audit.write_text(json.dumps({"report": full_data(), "exit_code": 1}))
    args = argparse.Namespace(audit=str(audit), out=str(tmp_path / "rep"), format="text")
    assert report_cli.run(args) == 0
    assert "handoff.html" in capsys.readouterr().out
    assert "REFUSED" in (tmp_path / "rep" / "handoff.html").read_text()
    assert load_report_data(audit) == full_data()


def test_cli_end_to_end_and_bad_input(tmp_path: Path) -> None:
    audit = tmp_path / "audit.json"
    audit.write_text(json.dumps(full_data()))
    done = run_cli("report", str(audit), "--out", str(tmp_path / "r"), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert Path(json.loads(done.stdout)["html"]).is_file()
    audit.write_text('{"a": 1, "a": 2}')
    bad = run_cli("report", str(audit), "--out", str(tmp_path / "r"))
    assert bad.returncode == 2 and "duplicate key" in bad.stderr
    with pytest.raises(InputNotFoundError):
        load_report_data(tmp_path / "missing.json")
    audit.write_text("[1]")
    with pytest.raises(InputError, match="JSON object"):
        load_report_data(audit)
    assert run_cli("report", "--help").returncode == 0


def test_json_keeps_values_and_writes_fail_cleanly(tmp_path: Path) -> None:
    from ftmanifest.fsutil import WriteError
    from ftmanifest.results.report import render_json

    assert json.loads(render_json({"manifest": {"path": tmp_path}})) == {
        "manifest": {"path": str(tmp_path)}
    }
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(WriteError):
        write_report(full_data(), blocker / "out")


def test_bare_urls_and_addresses_are_code_spans_not_links() -> None:
    # GFM links these in plain text whatever is escaped around them
    data = full_data()
    data["findings"][0]["message"] = (
        "fetch https://evil.example/x?a=1 or www.evil.example, mail ops@evil.example"
    )
    md = render_markdown(data)
    assert "`https://evil.example/x?a=1`" in md and "`www.evil.example,`" in md
    assert "`ops@evil.example`" in md
    outside_code = re.sub(r"(`+).*?\1", "", md)
    assert not re.search(r"https?://|www\.|@evil", outside_code)


def test_the_readable_report_carries_no_absolute_path_of_this_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handoff is read on other machines: the Markdown and the HTML show a path
    under the working folder relative to it, one under home from ``~/``, any
    other by its last names only; the JSON keeps the exact values."""
    work, home, elsewhere = tmp_path / "work", tmp_path / "home", tmp_path / "srv" / "models"
    for folder in (work, home):
        folder.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(home))
    data = full_data()
    data["signature"] = {
        "trust_path": f"{work}/exp/.ftmanifest/allowed_signers",
        "trust_source": f"repository root {work}/exp, searched from {home}/keys",
        "registry": "https://huggingface.co/tiny/llama/resolve/main",  # a URL: kept
    }
    data["history"] = {"ledger": f"{elsewhere}/llama/.ftmanifest/ledger"}
    data["model"]["path"] = "out/model"  # relative: kept
    text = render_markdown(data) + render_html(data)
    assert str(tmp_path) not in text
    assert "exp/.ftmanifest/allowed_signers" in text
    assert "repository root exp, searched from ~/keys" in text
    assert ".../.ftmanifest/ledger" in text
    assert "https://huggingface.co/tiny/llama/resolve/main" in text
    assert "out/model" in text
    written = write_report(data, tmp_path / "out")
    assert str(work) in written.json.read_text("utf-8")  # the machine's own record: exact
