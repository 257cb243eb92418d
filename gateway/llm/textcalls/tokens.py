"""Calls framed by special tokens: DeepSeek R1/V3/V3.1 and Kimi K2 call sections, Command R7B
actions, InternLM2 plugins, Firefunction's `functools[...]` and Functionary's `>>>name`.
"""

from __future__ import annotations

import re

from gateway.llm.lenient_json import skip_ws
from gateway.llm.textcalls.jsoncalls import arguments_from, json_calls
from gateway.llm.textcalls.model import NAME, Calls, Context, ParsedCall

WRAPPER_NAMES = (
    "tool_calls?|tools?|function_calls?|functioncall|minimax:tool_call|seed:tool_call"
    "|longcat_tool_call|response|json|xml|call"
)
_CLOSER = re.compile(
    rf"\s*(?:(?i:</(?:{WRAPPER_NAMES}|function|invoke)>)|<tool_call\|>|<\|/tool_call\|>"
    r"|<end_function_call>|<turn\|>|<\|eom_id\|>|<\|eot_id\|>|<\|python_end\|>"
    r"|<\|END_ACTION\|>|<\|action_end\|>|</｜+DSML｜+(?:function|tool)_calls>)"
)

# DeepSeek writes its tokens with fullwidth bars and `▁`; Kimi and some GGUF conversions
# spell the same shapes in ASCII.
_CALL_BEGIN = re.compile(r"\s*<[|｜]tool[_▁]call[_▁]begin[|｜]>")
_CALL_END = re.compile(r"\s*(?:```\s*)?<[|｜]tool[_▁]call[_▁]end[|｜]>")
_SECTION_END = re.compile(r"\s*<[|｜]tool[_▁]calls(?:[_▁]section)?[_▁]end[|｜]>")
_HEADER = re.compile(
    r"\s*([^<>\n]{1,160}?)\s*(<[|｜]tool[_▁]sep[|｜]>|<\|tool_call_argument_begin\|>)"
)
_FENCED_NAME = re.compile(r"\s*([A-Za-z_][\w.\-]{0,127})[ \t]*\n\s*```[a-z]*[ \t]*\n?")
_KIMI_NAME = re.compile(r"(?:functions\.)?([A-Za-z_][\w.\-]{0,127}?)(?::\d+)?")
_FUNCTIONARY_NAME = re.compile(r"([A-Za-z_][\w.\-]{0,127})\n")


def skip_closers(text: str, pos: int) -> int:
    """Past the closing tags and end-of-turn tokens that follow a call, if any."""
    for _ in range(3):
        closer = _CLOSER.match(text, pos)
        if closer is None:
            break
        pos = closer.end()
    return pos


def section(text: str, match: re.Match[str], ctx: Context) -> tuple[Calls, int]:
    """DeepSeek `<｜tool▁calls▁begin｜>` / Kimi `<|tool_calls_section_begin|>` sections, or one
    `<｜tool▁call▁begin｜>` call on its own."""
    in_section = "calls" in match.group()
    calls: Calls = []
    pos = match.end()
    while True:
        if in_section or calls:
            begin = _CALL_BEGIN.match(text, pos)
            if begin:
                pos = begin.end()
            elif calls:
                break
        found = _section_call(text, pos, ctx)
        if found is None:
            break
        calls.append(found[0])
        pos = found[1]
    if not calls:
        return [], match.end()
    closing = _SECTION_END.match(text, pos)
    return calls, closing.end() if closing else pos


def _section_call(text: str, pos: int, ctx: Context) -> tuple[ParsedCall, int] | None:
    """`function<sep>name\\n```json\\n{...}\\n```` (R1, V3), `name<sep>{...}` (V3.1) or
    `functions.name:0<argument_begin>{...}` (Kimi), up to the call-end token."""
    header = _HEADER.match(text, pos)
    if header is None:
        return None
    fenced = _FENCED_NAME.match(text, header.end())
    if fenced:
        name, start = fenced.group(1), fenced.end()
    else:
        kimi = _KIMI_NAME.fullmatch(header.group(1).strip())
        if kimi is None:
            return None
        name, start = kimi.group(1), header.end()
    if not NAME.fullmatch(name):
        return None
    read = ctx.read(text, start)
    if read is None:
        return None
    arguments = arguments_from(read[0], strict=False)
    if arguments is None:
        return None
    closing = _CALL_END.match(text, read[1])
    return ParsedCall(name, arguments), closing.end() if closing else read[1]


def action(text: str, match: re.Match[str], ctx: Context) -> tuple[Calls, int]:
    """Command R7B `<|START_ACTION|>[...]`, InternLM2 `<|action_start|><|plugin|>{...}` and
    Firefunction / Phi-4-mini `functools[...]`: JSON calls after a token."""
    sequence = json_calls(text, skip_ws(text, match.end()), ctx, strict=False)
    if sequence is None:
        return [], match.end()
    return sequence[0], skip_closers(text, sequence[1])


def functionary(text: str, match: re.Match[str], ctx: Context) -> tuple[Calls, int]:
    """Functionary v3.2: `>>>name` on its own line, then the arguments as one JSON object."""
    head = _FUNCTIONARY_NAME.match(text, match.end())
    if head is None or head.group(1) == "all":  # `>>>all` introduces plain text
        return [], match.end()
    read = ctx.read(text, head.end())
    if read is None or not isinstance(read[0], dict):
        return [], match.end()
    call = ParsedCall(head.group(1), read[0])
    if not ctx.offered([call]):
        return [], match.end()
    return [call], read[1]
