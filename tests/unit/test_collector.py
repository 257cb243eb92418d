"""The collector settings `chatgate run` applies once started (gateway/runtime/collector.py)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from gateway.runtime.collector import YOUNG_THRESHOLD, settle_collector


@pytest.fixture
def restored_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_start_up_objects_are_frozen_and_young_collections_spaced(
    restored_collector: None,
) -> None:
    gc.set_threshold(700, 10, 10)
    built_at_start = [{"n": n} for n in range(1000)]  # containers the collector tracks
    settle_collector()
    assert gc.get_freeze_count() >= len(built_at_start)
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)  # the older generations as they were


def test_cycles_are_still_collected_on_their_own(restored_collector: None) -> None:
    settle_collector()

    class Node:
        def __init__(self) -> None:
            self.other: Node | None = None

    first, second = Node(), Node()
    first.other, second.other = second, first
    gone = weakref.ref(first)
    del first, second
    assert gone() is not None  # a cycle: reference counting alone never frees it
    # Turns allocating objects that stay alive a while: the young collection comes by itself.
    kept = [{"n": n} for n in range(2 * YOUNG_THRESHOLD)]
    assert gone() is None and len(kept) == 2 * YOUNG_THRESHOLD
