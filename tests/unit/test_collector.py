"""The collector settings `chatgate run` applies once started (gateway/runtime/collector.py)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from gateway.intake.load import IntakeLoad
from gateway.runtime.collector import YOUNG_THRESHOLD, CrowdPause, settle_collector


@pytest.fixture
def restored_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    gc.enable()


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def a_cycle() -> weakref.ref[Node]:
    """A weak reference to a cycle nothing else holds: only the collector frees it."""
    first, second = Node(), Node()
    first.other, second.other = second, first
    return weakref.ref(first)


def allocate_past_the_threshold() -> list[dict[str, int]]:
    return [{"n": n} for n in range(3 * gc.get_threshold()[0])]


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


async def test_a_crowd_holds_automatic_collection_until_it_passes(
    restored_collector: None,
) -> None:
    gc.set_threshold(700, 10, 10)
    load = IntakeLoad(busy_above=2)
    pause = CrowdPause()
    pause.follow(load)
    for _ in range(2):
        load.enter()
    assert gc.isenabled() and not pause.holding  # not a crowd yet
    load.enter()
    assert not gc.isenabled() and pause.holding
    cycle = a_cycle()
    kept = allocate_past_the_threshold()
    assert cycle() is not None  # no collection while the calls wait
    load.leave()
    assert gc.isenabled() and not pause.holding
    kept += allocate_past_the_threshold()
    assert cycle() is None and kept  # collected once the crowd passed


async def test_a_crowd_that_lasts_is_collected_after_the_longest_pause(
    restored_collector: None,
) -> None:
    gc.set_threshold(700, 10, 10)
    load = IntakeLoad(busy_above=0)
    pause = CrowdPause(longest=0.05)
    pause.follow(load)
    load.enter()
    cycle = a_cycle()
    assert not gc.isenabled()
    await asyncio.sleep(0.2)
    assert gc.isenabled() and not pause.holding
    kept = allocate_past_the_threshold()
    assert cycle() is None and kept
    load.leave()  # the crowd passes after all: nothing to undo
    assert gc.isenabled()
    load.enter()  # the next crowd is held again
    assert not gc.isenabled() and pause.holding
    pause.release()


async def test_collection_turned_off_elsewhere_stays_off(restored_collector: None) -> None:
    gc.disable()
    pause = CrowdPause()
    pause.hold()
    assert not pause.holding
    pause.release()
    assert not gc.isenabled()
