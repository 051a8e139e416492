from __future__ import annotations

import pytest

from ftmanifest.scan.text.pii import iban_valid, luhn, plausible_card_iin
from ftmanifest.scan.text.text import scan_buffer


def rules(text: str) -> set[str]:
    return {f.rule for f in scan_buffer(text.encode(), path="x")}


@pytest.mark.parametrize(("digits", "ok"), [("4111111111111111", True), ("4111111111111112", False),
                                            ("79927398713", True), ("79927398710", False)])  # fmt: skip  # noqa: E501
def test_luhn(digits: str, ok: bool) -> None:
    assert luhn(digits) is ok


def test_card_iin() -> None:
    assert plausible_card_iin("4111111111111111")
    assert plausible_card_iin("378282246310005")
    assert not plausible_card_iin("1234567812345670")  # Luhn-valid, no issuer


@pytest.mark.parametrize("iban", ["DE89370400440532013000", "GB82WEST12345698765432",
                                  "FR1420041010050500013M02606"])  # fmt: skip
def test_iban_mod97(iban: str) -> None:
    assert iban_valid(iban)
    assert not iban_valid(iban[:-1] + ("1" if iban[-1] != "1" else "2"))


@pytest.mark.parametrize("ssn", ["536-22-1947", "001-01-0001"])
def test_ssn_valid(ssn: str) -> None:
    assert "pii.us-ssn" in rules(f"ssn {ssn}")


@pytest.mark.parametrize("ssn", ["000-22-1947", "666-22-1947", "900-22-1947", "536-00-1947",
                                 "536-22-0000"])  # fmt: skip
def test_ssn_invalid(ssn: str) -> None:
    assert "pii.us-ssn" not in rules(f"ssn {ssn}")


@pytest.mark.parametrize("ip", ["8.8.8.8", "151.101.1.69", "2606:4700:4700::1111"])
def test_public_ip(ip: str) -> None:
    assert rules(f"peer {ip} up") & {"pii.ipv4-public", "pii.ipv6-public"}


@pytest.mark.parametrize("ip", ["10.1.2.3", "172.16.5.4", "192.168.0.1", "127.0.0.1", "169.254.9.9",
                                "198.51.100.7", "224.0.0.1", "fe80::1:2:3:4", "2001:db8::1:2:3",
                                "::1", "v1.2.3.4", "1.2.3.4.5", "torch==2.1.0.1"])  # fmt: skip
def test_quiet_ip(ip: str) -> None:
    assert not rules(f"peer {ip} up")


@pytest.mark.parametrize("phone", ["+49 30 1234 5678", "+1 (415) 555-0132", "+44 7911 123456",
                                   "+33 1 23 45 67 89"])  # fmt: skip
def test_phone_international(phone: str) -> None:
    assert "pii.phone" in rules(f"call {phone} now")


@pytest.mark.parametrize("text", ["x = a+12345", "2024-01-01T10:00:00+01:00", "score +3.5",
                                  "call 030 1234 5678"])  # fmt: skip
def test_phone_quiet(text: str) -> None:
    assert "pii.phone" not in rules(text)


def test_email() -> None:
    assert "pii.email" in rules("write to ana.silva@uni-lisboa.pt")
    assert "pii.email" not in rules("write to ana@example.com or icon@2x.png")


def test_secret_in_url_is_not_double_reported_as_email() -> None:
    found = rules("postgres://svc:oPeKKO1O4IUAAoBE@db.corp.io/app")
    assert found == {"secret.url-password"}
