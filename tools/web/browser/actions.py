"""Which browser actions have consequences a person should approve (buying, paying, deleting,
sending, posting), and when the model may type into a password field.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from tools.web.browser.snapshot import ElementInfo

# English words on buttons, links and form targets that commit something outside the page.
_CONSEQUENTIAL = re.compile(
    r"\b(buy|purchase|order|checkout|check out|pay|payment|donate|transfer|subscribe|"
    r"delete|remove|erase|destroy|send|post|publish|tweet|reply)\b",
    re.IGNORECASE,
)
_CAMEL = re.compile(r"([a-z])([A-Z])")
_SEPARATORS = re.compile(r"[_\-/.?=&#+%:]+")


def _words(text: str) -> str:
    """`deleteAccount`, `delete_account` and `/account/delete` all read as words."""
    return _SEPARATORS.sub(" ", _CAMEL.sub(r"\1 \2", text))


def _target_words(url: str) -> str:
    """The path and query of a URL, without the host (a shop's domain name is no action)."""
    parts = urlsplit(url)
    return _words(f"{parts.path} {parts.query}")


def consequence(info: ElementInfo, *, submitting: bool) -> str | None:
    """The word that makes this click (or Enter, when `submitting`) consequential, or None."""
    texts: list[str] = []
    if submitting:
        # Enter submits the form with its default button, or sends what a chat box holds.
        texts += [info.name, *info.form_buttons[:1]]
        if info.form_action:
            texts.append(_target_words(info.form_action))
    else:
        texts.append(info.name)
        if info.href:
            texts.append(_target_words(info.href))
        if info.is_submit and info.form_action:
            texts.append(_target_words(info.form_action))
    for text in texts:
        match = _CONSEQUENTIAL.search(_words(text))
        if match:
            return match.group(1).lower()
    return None


def from_the_person(text: str, user_text: str) -> bool:
    """Whether `text` is in what the person wrote this turn (passwords must come from them)."""
    return bool(text) and text in user_text
