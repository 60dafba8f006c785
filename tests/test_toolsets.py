from __future__ import annotations

import pytest

from threadloom.errors import ConfigError
from threadloom.server.coordination_tools import COORDINATION_TOOLS
from threadloom.server.memory_tools import MEMORY_TOOLS
from threadloom.server.thread_tools import THREAD_TOOLS
from threadloom.server.tools import TOOLS
from threadloom.server.toolsets import DEFAULT_GROUPS, select_tools

ALL = {t.name: t for t in (*TOOLS, *MEMORY_TOOLS, *THREAD_TOOLS, *COORDINATION_TOOLS)}


def test_the_default_toolset_is_the_default_groups_and_the_tools_picked_from_others() -> None:
    expected = {t.name for t in ALL.values() if t.group in DEFAULT_GROUPS or t.default}
    assert select_tools("default", ALL) == expected
    assert select_tools("", ALL) == select_tools("default", ALL)
    assert {"signal_send", "signal_inbox"} <= expected and "peers" not in expected


def test_full_enables_every_tool() -> None:
    assert select_tools("full", ALL) == set(ALL)


def test_groups_can_be_named_one_by_one() -> None:
    assert select_tools("core", ALL) == {t.name for t in ALL.values() if t.group == "core"}
    coordination = select_tools("coordination", ALL)  # a group named whole includes its default tools
    assert {"signal_send", "signal_inbox", "peers"} <= coordination and "memory_store" not in coordination


def test_an_unknown_group_is_a_config_error_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="known: agents, coordination, core, default, full"):
        select_tools("core,nonsense", ALL)


def test_every_tool_declares_its_hints() -> None:
    for tool in ALL.values():
        hints = tool.annotations()
        assert hints.title
        assert hints.read_only_hint is not None
        assert hints.destructive_hint is not None
        assert hints.idempotent_hint is not None
