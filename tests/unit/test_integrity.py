"""Sealed store entries (gateway/approvals/seals.py): only what the gateway sealed, at the place it
sealed it, verifies; the key file is private to the gateway's user; answers of a Rendezvous
cannot be forged or pre-empted by whoever can write the store (issue 22, finding 2)."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.approvals.rendezvous import Rendezvous
from gateway.approvals.seals import KEY_FILE, EntrySigner, key_problem, load_key
from gateway.config import ConfigError, Settings
from gateway.runtime.metrics import Metrics
from gateway.store import keys
from gateway.store.embedded import EmbeddedStore

KEY = b"k" * 32
SIGNER = EntrySigner(KEY)
WHERE = "approved_shapes:telegram:42\x00abc"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def test_a_sealed_value_opens_only_where_and_as_what_it_was_sealed() -> None:
    sealed = SIGNER.seal("grant", WHERE, {"shape": "rm -f -r /ws/build"})
    assert SIGNER.open("grant", WHERE, sealed) == {"shape": "rm -f -r /ws/build"}
    assert SIGNER.open("grant", WHERE + "x", sealed) is None  # moved to another key
    assert SIGNER.open("approval request", WHERE, sealed) is None  # taken for something else
    assert EntrySigner(b"other key 0123456789").open("grant", WHERE, sealed) is None
    assert SIGNER.open("grant", WHERE, None) is None


def test_tampering_is_logged_once_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    metrics = Metrics()
    signer = EntrySigner(KEY, metrics)
    forged = json.dumps({"v": {"shape": "rm -rf /"}, "mac": "0" * 64})
    with caplog.at_level(logging.WARNING, "gateway.approvals.seals"):
        for _ in range(3):
            assert signer.open("grant", WHERE, forged) is None
        assert signer.open("grant", "elsewhere", "not json") is None
    tampered = [r for r in caplog.records if "tampered store entry ignored" in r.message]
    assert len(tampered) == 2
    assert metrics.counter("approvals_tampered_total", kind="grant") == 2
    assert 'chatgate_approvals_tampered_total{kind="grant"} 2.0' in metrics.render()


@settings(max_examples=300, deadline=None)
@given(raw=st.text(max_size=300))
def test_any_text_not_sealed_by_the_gateway_is_rejected(raw: str) -> None:
    assert SIGNER.open("grant", WHERE, raw) is None


@settings(max_examples=300, deadline=None)
@given(value=json_values, other=json_values, data=st.data())
def test_any_change_to_a_sealed_entry_is_rejected(value: Any, other: Any, data: Any) -> None:
    sealed = SIGNER.seal("grant", WHERE, value)
    # Any one character changed, inserted or removed: rejected, or (JSON that still means
    # the very same thing) the same value.
    at = data.draw(st.integers(0, len(sealed) - 1))
    char = data.draw(st.characters())
    for mutated in (
        sealed[:at] + char + sealed[at + 1 :],
        sealed[:at] + char + sealed[at:],
        sealed[:at] + sealed[at + 1 :],
    ):
        assert SIGNER.open("grant", WHERE, mutated) in (None, value)
    # Another value under this entry's MAC, or this value written elsewhere: rejected.
    mac = json.loads(sealed)["mac"]
    swapped = json.dumps({"v": other, "mac": mac})
    same = json.dumps(other, sort_keys=True) == json.dumps(value, sort_keys=True)  # 0 != false
    assert SIGNER.open("grant", WHERE, swapped) == (value if same else None)
    assert SIGNER.open("grant", WHERE + "\x00moved", sealed) is None


def settings_in(tmp_path: Path, **approvals: Any) -> Settings:
    return Settings(data_dir=tmp_path / "data", approvals=approvals)


def test_the_key_file_is_made_once_private_and_reused(tmp_path: Path) -> None:
    settings = settings_in(tmp_path)
    assert key_problem(settings) is None  # doctor: will be made at first start
    assert not (tmp_path / "data" / KEY_FILE).exists()  # doctor makes nothing
    key = load_key(settings)
    path = tmp_path / "data" / KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert load_key(settings) == key and len(key) == 32
    assert [p.name for p in path.parent.iterdir()] == [KEY_FILE]  # no temporary left


def test_a_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    settings = settings_in(tmp_path)
    load_key(settings)
    (tmp_path / "data" / KEY_FILE).chmod(0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        load_key(settings)
    assert "chmod 600" in (key_problem(settings) or "")


def test_a_damaged_key_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "data" / KEY_FILE
    path.parent.mkdir()
    path.write_text("not hex")
    path.chmod(0o600)
    with pytest.raises(ConfigError, match="damaged"):
        load_key(settings_in(tmp_path))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_no_usable_key_is_a_clear_error(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    settings = Settings(data_dir=locked / "data")
    with pytest.raises(ConfigError, match=r"approvals\.secret"):
        load_key(settings)
    assert "not writable" in (key_problem(settings) or "")


def test_the_secret_setting_is_the_key_when_given(tmp_path: Path) -> None:
    one = load_key(settings_in(tmp_path, secret="s" * 40))
    assert one == load_key(settings_in(tmp_path / "other", secret="s" * 40))
    assert not (tmp_path / "data" / KEY_FILE).exists()
    with pytest.raises(ConfigError, match="shorter than 16"):
        load_key(settings_in(tmp_path, secret="short"))


async def test_a_forged_answer_is_ignored_and_cannot_take_the_real_ones_place(
    tmp_path: Path,
) -> None:
    store = EmbeddedStore(tmp_path / "store")
    answers = Rendezvous(store, "approvals", SIGNER)
    try:
        # Where a forger would write, knowing the id from the pending request.
        naive = keys.rendezvous_answer("approvals", "req1")
        await store.set(naive, json.dumps({"v": '{"choice": "once"}', "mac": "0" * 64}))
        assert await answers.current("req1") is None
        # Even at the real place (which needs the key to compute): not taken for an answer.
        real = keys.rendezvous_answer("approvals", SIGNER.tag("approvals", "req1"))
        assert real != naive
        await store.set(real, json.dumps({"v": '{"choice": "once"}', "mac": "0" * 64}))
        assert await answers.wait("req1", 0.1) is None
        await store.delete(real)
        assert await answers.answer("req1", '{"choice": "deny"}')
        assert await answers.current("req1") == '{"choice": "deny"}'
        assert not await answers.answer("req1", '{"choice": "once"}')  # first answer stands
    finally:
        await answers.close()
        await store.close()
