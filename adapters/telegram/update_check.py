"""What a webhook update must look like before python-telegram-bot reads it: the library
builds its objects without checking types, so a `text` that is a list or a `from` that is a
number would fail later, inside the turn's intake, as a 500 and a traceback."""

from __future__ import annotations

from typing import Any

# Updates that carry a message the gateway reads.
_MESSAGE_KEYS = ("message", "edited_message", "channel_post", "edited_channel_post")
_INT, _STR, _BOOL = (int,), (str,), (bool,)


def shape_problem(data: dict[str, Any]) -> str:
    """What is wrong with the fields the gateway reads ("" when nothing is)."""
    for key in _MESSAGE_KEYS:
        if key in data:
            problem = _message(data[key], key)
            if problem:
                return problem
    query = data.get("callback_query")
    if query is not None:
        if not isinstance(query, dict):
            return "callback_query is not an object"
        problem = _fields(query, "callback_query", id=_STR, data=_STR) or _user(
            query.get("from"), "callback_query.from", required=True
        )
        if problem:
            return problem
        if "message" in query:
            return _message(query["message"], "callback_query.message")
    return ""


def _message(value: Any, where: str, *, depth: int = 0) -> str:
    if not isinstance(value, dict):
        return f"{where} is not an object"
    problem = _fields(
        value, where, message_id=_INT, message_thread_id=_INT, text=_STR, caption=_STR
    )
    problem = problem or _user(value.get("from"), f"{where}.from")
    chat = value.get("chat")
    if not problem:
        problem = (
            _fields(chat, f"{where}.chat", id=_INT, type=_STR, title=_STR)
            if isinstance(chat, dict)
            else f"{where}.chat is not an object"
        )
    for name in ("entities", "caption_entities"):
        entities = value.get(name)
        if problem or entities is None:
            continue
        if not isinstance(entities, list) or not all(
            isinstance(e, dict) and not _fields(e, name, type=_STR, offset=_INT, length=_INT)
            for e in entities
        ):
            problem = f"{where}.{name} is not a list of entities"
    quote = value.get("quote")
    if not problem and quote is not None:
        problem = (
            _fields(quote, f"{where}.quote", text=_STR)
            if isinstance(quote, dict)
            else f"{where}.quote is not an object"
        )
    reply = value.get("reply_to_message")
    if not problem and reply is not None and depth == 0:
        problem = _message(reply, f"{where}.reply_to_message", depth=1)
    return problem


def _user(value: Any, where: str, *, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, dict):
        return f"{where} is not an object"
    return _fields(
        value, where, id=_INT, is_bot=_BOOL, first_name=_STR, last_name=_STR, username=_STR
    )


def _fields(obj: dict[str, Any], where: str, /, **types: tuple[type, ...]) -> str:
    """The first field present with the wrong type (`None` counts as absent)."""
    for name, wanted in types.items():
        value = obj.get(name)
        if value is None:
            continue
        # bool is an int in Python; Telegram's integers are never true/false.
        if not isinstance(value, wanted) or (wanted is _INT and isinstance(value, bool)):
            return f"{where}.{name} is not a {wanted[0].__name__}"
    return ""
