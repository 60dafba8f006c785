from __future__ import annotations

import pytest

from threadloom.errors import ConfigError
from threadloom.server.tools import TOOLS
from threadloom.server.toolsets import DEFAULT_GROUPS, select_tools

ALL = {t.name: t for t in TOOLS}


def test_the_default_toolset_is_the_default_groups() -> None:
    assert select_tools("default", ALL) == {t.name for t in TOOLS if t.group in DEFAULT_GROUPS}
    assert select_tools("", ALL) == select_tools("default", ALL)


def test_full_enables_every_tool() -> None:
    assert select_tools("full", ALL) == set(ALL)


def test_groups_can_be_named_one_by_one() -> None:
    assert select_tools("core", ALL) == {t.name for t in TOOLS if t.group == "core"}


def test_an_unknown_group_is_a_config_error_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="known: core, default, full"):
        select_tools("core,nonsense", ALL)


def test_every_tool_declares_its_hints() -> None:
    for tool in TOOLS:
        hints = tool.annotations()
        assert hints.title
        assert hints.read_only_hint is not None
        assert hints.destructive_hint is not None
        assert hints.idempotent_hint is not None
