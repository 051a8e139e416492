from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ftmanifest.manifest.canonical import CanonicalizationError, canonical_json, es_number

# RFC 8785, Appendix B: IEEE 754 bit patterns and their required serialisation.
RFC_NUMBERS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "expected"), RFC_NUMBERS)
def test_numbers_follow_ecmascript(bits: str, expected: str) -> None:
    value = struct.unpack(">d", bytes.fromhex(bits))[0]
    assert es_number(value) == expected


def test_keys_sort_by_utf16_code_units() -> None:
    # RFC 8785 section 3.2.3: the emoji (a surrogate pair D83D DE00) sorts
    # before U+FB33 in UTF-16, although it comes after it in code points.
    data = {"\u20ac": 0, "\r": 1, "\ufb33": 2, "1": 3, "\U0001f600": 4, "\u0080": 5, "\u00f6": 6}
    out = canonical_json(data).decode("utf-8")
    keys = list(json.loads(out))
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


def test_whitespace_and_escapes() -> None:
    out = canonical_json({"b": [1, 2.5, None, True], "a": 'line\nbreak \u00e9 \x1f "q"'})
    assert out == b'{"a":"line\\nbreak \xc3\xa9 \\u001f \\"q\\"","b":[1,2.5,null,true]}'


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 2**53, {1: "x"}, {"a": object()}])
def test_values_without_a_canonical_form_are_refused(bad: object) -> None:
    with pytest.raises(CanonicalizationError):
        canonical_json(bad)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.text()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _numbers_as_floats(value: object) -> object:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list):
        return [_numbers_as_floats(v) for v in value]
    assert isinstance(value, dict)
    return {k: _numbers_as_floats(v) for k, v in value.items()}


@given(JSON_VALUES)
def test_round_trips_and_is_idempotent(value: object) -> None:
    out = canonical_json(value)
    # JSON has one number type: compare numbers as doubles, as I-JSON does.
    again = json.loads(out, parse_int=float)
    assert again == _numbers_as_floats(value)
    assert canonical_json(again) == out


@given(st.dictionaries(st.text(), st.integers(0, 9), max_size=6), st.randoms())
def test_key_order_of_input_does_not_matter(data: dict[str, int], rnd: object) -> None:
    items = list(data.items())
    rnd.shuffle(items)  # type: ignore[attr-defined]
    assert canonical_json(dict(items)) == canonical_json(data)
