from __future__ import annotations

import pytest

from threadloom.daemon.protocol import decode, encode, version_key


@pytest.mark.parametrize(
    ("older", "newer"),
    [("0.0.1", "0.1.0"), ("0.2.0rc1", "0.2.0"), ("0.2.0", "0.2.1"), ("1.9.0", "1.10.0"), ("junk", "0.0.1")],
)
def test_versions_order_as_releases_do(older: str, newer: str) -> None:
    assert version_key(older) < version_key(newer)


def test_trailing_zeros_and_build_labels_do_not_make_a_version_newer() -> None:
    assert version_key("0.1") == version_key("0.1.0") == version_key("0.1.0+local.3")


def test_headers_round_trip_and_reject_non_objects() -> None:
    assert decode(encode({"kind": "hello", "n": 1}).strip()) == {"kind": "hello", "n": 1}
    with pytest.raises(ValueError):
        decode(b"[1, 2]")
