"""What a webhook update must look like before python-telegram-bot reads it: the library
builds its objects without checking types, so a `text` that is a list or a `from` that is a
number would fail later, inside the turn's intake, as a 500 and a traceback.

Every webhook call runs this before its answer, so the field lists are made once and a
problem's path is spelled out only when there is one."""

from __future__ import annotations

from typing import Any

# Updates that carry a message the gateway reads.
_MESSAGE_KEYS = ("message", "edited_message", "channel_post", "edited_channel_post")
_INT, _STR, _BOOL = (int,), (str,), (bool,)
Fields = tuple[tuple[str, tuple[type, ...]], ...]
_MESSAGE: Fields = (
    ("message_id", _INT),
    ("message_thread_id", _INT),
    ("text", _STR),
    ("caption", _STR),
)
_USER: Fields = (
    ("id", _INT),
    ("is_bot", _BOOL),
    ("first_name", _STR),
    ("last_name", _STR),
    ("username", _STR),
)
_CHAT: Fields = (("id", _INT), ("type", _STR), ("title", _STR))
_ENTITY: Fields = (("type", _STR), ("offset", _INT), ("length", _INT))
_QUOTE: Fields = (("text", _STR),)
_QUERY: Fields = (("id", _STR), ("data", _STR))
NOT_OBJECT = " is not an object"


def shape_problem(data: dict[str, Any]) -> str:
    """What is wrong with the fields the gateway reads ("" when nothing is)."""
    for key in _MESSAGE_KEYS:
        if key in data:
            problem = _message(data[key])
            if problem:
                return _at(key, problem)
    query = data.get("callback_query")
    if query is not None:
        if not isinstance(query, dict):
            return "callback_query" + NOT_OBJECT
        problem = _wrong(query, _QUERY)
        if not problem:
            sender = query.get("from")
            problem = _at("from", _user(sender) if sender is not None else NOT_OBJECT)
        if not problem and "message" in query:
            problem = _at("message", _message(query["message"]))
        return _at("callback_query", problem)
    return ""


def _at(where: str, problem: str) -> str:
    """A problem found inside `where`, named from the update's top."""
    if not problem:
        return ""
    return where + problem if problem.startswith(" ") else f"{where}.{problem}"


def _message(value: Any, *, depth: int = 0) -> str:
    if not isinstance(value, dict):
        return NOT_OBJECT
    problem = _wrong(value, _MESSAGE)
    if problem:
        return problem
    sender = value.get("from")
    if sender is not None:
        problem = _at("from", _user(sender))
        if problem:
            return problem
    chat = value.get("chat")
    problem = _at("chat", _wrong(chat, _CHAT) if isinstance(chat, dict) else NOT_OBJECT)
    if problem:
        return problem
    for name in ("entities", "caption_entities"):
        entities = value.get(name)
        if entities is not None and not (
            isinstance(entities, list)
            and all(isinstance(e, dict) and not _wrong(e, _ENTITY) for e in entities)
        ):
            return f"{name} is not a list of entities"
    quote = value.get("quote")
    if quote is not None:
        problem = _at("quote", _wrong(quote, _QUOTE) if isinstance(quote, dict) else NOT_OBJECT)
        if problem:
            return problem
    reply = value.get("reply_to_message")
    if reply is not None and depth == 0:
        return _at("reply_to_message", _message(reply, depth=1))
    return ""


def _user(value: Any) -> str:
    return _wrong(value, _USER) if isinstance(value, dict) else NOT_OBJECT


def _wrong(obj: dict[str, Any], fields: Fields) -> str:
    """The first field present with the wrong type (`None` counts as absent)."""
    for name, wanted in fields:
        value = obj.get(name)
        if value is None:
            continue
        # bool is an int in Python; Telegram's integers are never true/false.
        if not isinstance(value, wanted) or (wanted is _INT and isinstance(value, bool)):
            return f"{name} is not a {wanted[0].__name__}"
    return ""
