"""Tool calls whose arguments are written as XML-style tags rather than one JSON object:
`<function=name>` with a JSON body or Qwen3-Coder's `<parameter=key>` tags, Hermes'
`<function name="...">`, GLM's `<arg_key>`/`<arg_value>` pairs, and the `<invoke name="...">`
blocks of MiniMax, DeepSeek V3.2 (DSML) and Claude-style `<function_calls>`.
"""

from __future__ import annotations

import re
from typing import Any

from gateway.llm.lenient_json import LenientJSONError, skip_ws
from gateway.llm.lenient_json import loads as loads_lenient
from gateway.llm.textcalls.model import NAME, Context, ParsedCall

_QUOTED_NAME = r"""(?:"([^"<>]{1,128})"|'([^'<>]{1,128})'|([^\s"'<>]{1,128}))"""
FUNCTION_TAG = re.compile(rf"<function(?:=([^>\s]{{1,128}})|\s+name\s*=\s*{_QUOTED_NAME}\s*)>")
_PARAMETER_EQ = re.compile(r"<parameter=([^>\s]{1,128})>")
_DSML = "(?:｜+DSML｜+)?"  # DeepSeek V3.2 prefixes its tag names with this
INVOKE_TAG = re.compile(rf"<{_DSML}invoke\s+name\s*=\s*{_QUOTED_NAME}\s*>")
_PARAMETER_NAMED = re.compile(
    rf'<{_DSML}parameter\s+name\s*=\s*{_QUOTED_NAME}(?:\s+string\s*=\s*"(true|false)")?\s*>'
)
_PARAMETER_CLOSE = re.compile(rf"</{_DSML}parameter>")
_INVOKE_CLOSE = re.compile(rf"\s*</{_DSML}invoke>")
GLM_HEAD = re.compile(r"([A-Za-z_][\w.\-]{0,127})[ \t]*\n?\s*(?=<arg_key>|</tool_call>)")
_ARG_PAIR = re.compile(r"\s*<arg_key>([^<]{1,256})</arg_key>\s*<arg_value>")


def function_tag(text: str, pos: int, ctx: Context) -> tuple[ParsedCall, int] | None:
    """`<function=name>` or `<function name="name">` at `pos`, with a JSON or parameter body."""
    head = _opening(FUNCTION_TAG, text, pos, ctx)
    if head is None:
        return None
    name, arguments, end, tag_end = head
    if end == tag_end:
        while (param := _PARAMETER_EQ.match(text, skip_ws(text, end))) is not None:
            close = text.find("</parameter>", param.end())
            stop = close if close >= 0 else len(text)
            arguments[param.group(1)] = parameter_value(text[param.end() : stop])
            end = stop + len("</parameter>") if close >= 0 else stop
    after = skip_ws(text, end)
    if text.startswith("</function>", after):
        end = after + len("</function>")
    elif not arguments and not text.startswith(("<", "{"), after) and after < len(text):
        # `<function=x>` followed by prose: a mention, not a call.
        return None
    return ParsedCall(name, arguments), end


def invoke_tag(text: str, pos: int, ctx: Context) -> tuple[ParsedCall, int] | None:
    """`<invoke name="x"><parameter name="k">v</parameter>...</invoke>` at `pos`."""
    head = _opening(INVOKE_TAG, text, pos, ctx)
    if head is None:
        return None
    name, arguments, end, tag_end = head
    while (param := _PARAMETER_NAMED.match(text, skip_ws(text, end))) is not None:
        key = next(group for group in param.groups()[:3] if group is not None)
        close = _PARAMETER_CLOSE.search(text, param.end())
        stop = close.start() if close else len(text)
        raw = text[param.end() : stop]
        # DeepSeek marks string parameters: those stay text even when they look like numbers.
        arguments[key] = raw.strip("\n") if param.group(4) == "true" else parameter_value(raw)
        end = close.end() if close else stop
    closing = _INVOKE_CLOSE.match(text, end)
    if closing:
        end = closing.end()
    elif not arguments and end == tag_end:
        return None
    return ParsedCall(name, arguments), end


def _opening(
    tag: re.Pattern[str], text: str, pos: int, ctx: Context
) -> tuple[str, dict[str, Any], int, int] | None:
    """The opening tag at `pos`: the tool name, the arguments when a JSON object follows it,
    where those end (the tag's end when there are none yet), and where the tag ends."""
    match = tag.match(text, pos)
    if match is None:
        return None
    name = next(group for group in match.groups() if group is not None)
    if not NAME.fullmatch(name):
        return None
    i = skip_ws(text, match.end())
    if i < len(text) and text[i] == "{":
        read = ctx.read(text, i)
        if read is None or not isinstance(read[0], dict):
            return None
        return name, read[0], read[1], match.end()
    return name, {}, match.end(), match.end()


def glm_call(text: str, pos: int) -> tuple[ParsedCall, int] | None:
    """GLM 4.5+: `name` then `<arg_key>k</arg_key><arg_value>v</arg_value>` pairs."""
    head = GLM_HEAD.match(text, pos)
    if head is None:
        return None
    arguments: dict[str, Any] = {}
    end = head.end()
    while (pair := _ARG_PAIR.match(text, end)) is not None:
        close = text.find("</arg_value>", pair.end())
        stop = close if close >= 0 else len(text)
        arguments[pair.group(1).strip()] = parameter_value(text[pair.end() : stop])
        end = stop + len("</arg_value>") if close >= 0 else stop
    return ParsedCall(head.group(1), arguments), end


def parameter_value(raw: str) -> Any:
    """A tag's text as the value it spells: JSON or a Python literal when it is one, else text.

    Templates put the value on lines of its own; those line breaks are not part of it.
    """
    value = raw.strip("\n")
    stripped = value.strip()
    if not stripped:
        return value
    try:
        parsed = loads_lenient(stripped)
    except LenientJSONError:
        if stripped[0] in "[{" and '\\"' in stripped:
            # Some templates escape the quotes of JSON written inside a tag.
            try:
                return loads_lenient(stripped.replace('\\"', '"'))
            except LenientJSONError:
                pass
        return value
    # A bareword read back as itself is plain text; keep the original spacing.
    return value if isinstance(parsed, str) else parsed
