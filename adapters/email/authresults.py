"""Whether the receiving server vouched for a mail's From: domain (RFC 8601).

Only the topmost Authentication-Results header whose authserv-id is the trusted one counts:
the receiving server adds its header above everything the sender wrote, and a sender can
write any header, including one that claims to come from the receiving server further down.
The mail passes when DMARC passed, or DKIM passed with a signing domain that is the From:
domain (or its parent), or SPF passed for an envelope sender of the From: domain.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_METHOD = re.compile(r"^\s*([a-z0-9_.-]+)\s*=\s*([a-z]+)\b(.*)$", re.IGNORECASE | re.DOTALL)
_PROPERTY = re.compile(r"\b([a-z]+\.[a-z0-9_.-]+)\s*=\s*\"?([^\s;\"]+)\"?", re.IGNORECASE)
_COMMENT = re.compile(r"\([^()]*\)")


@dataclass(frozen=True)
class Verdict:
    trusted: bool
    why: str  # for the log line: which result passed, or what was missing


def verdict(headers: Sequence[str], authserv_id: str, from_domain: str) -> Verdict:
    """The verdict of the first header from `authserv_id` about `from_domain`."""
    wanted = authserv_id.lower()
    for header in headers:
        text = _COMMENT.sub("", " ".join(header.split()))
        server, _, results = text.partition(";")
        if server.strip().split(" ")[0].lower() != wanted:
            continue
        return _judge(results, from_domain.lower())
    return Verdict(False, f"no Authentication-Results from {authserv_id}")


def _judge(results: str, from_domain: str) -> Verdict:
    seen: list[str] = []
    for part in results.split(";"):
        found = _METHOD.match(part)
        if found is None:
            continue
        method, result, rest = found.group(1).lower(), found.group(2).lower(), found.group(3)
        props = {key.lower(): value.lower() for key, value in _PROPERTY.findall(rest)}
        seen.append(f"{method}={result}")
        if result != "pass":
            continue
        if method == "dmarc" and props.get("header.from", from_domain) == from_domain:
            return Verdict(True, "dmarc=pass")
        if method == "dkim" and _same_or_parent(props.get("header.d", ""), from_domain):
            return Verdict(True, "dkim=pass")
        if method == "spf":
            mailfrom = props.get("smtp.mailfrom", "").rpartition("@")[2]
            if mailfrom == from_domain:
                return Verdict(True, "spf=pass")
    return Verdict(False, " ".join(seen) or "no results")


def _same_or_parent(signer: str, domain: str) -> bool:
    return bool(signer) and (domain == signer or domain.endswith("." + signer))
