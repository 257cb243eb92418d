"""Find tool calls that a model wrote as text, in the dialects open models actually use.

`parse` splits a reply into visible content, tool calls and reasoning (`<think>` blocks and
their kin). Text that merely mentions a tag, or shows JSON that is not a call, stays content.
README.md ("Text tool calls") lists every format with an example.
"""

from gateway.llm.lenient_json import loads as loads_lenient
from gateway.llm.textcalls.markup import CALL_MARKERS
from gateway.llm.textcalls.model import ParsedCall, ParsedReply
from gateway.llm.textcalls.parser import _parse, parse
from gateway.llm.textcalls.reasoning import REASONING_TAGS, STRAY_CLOSERS, split_reasoning

__all__ = [
    "CALL_MARKERS",
    "REASONING_TAGS",
    "STRAY_CLOSERS",
    "ParsedCall",
    "ParsedReply",
    "_parse",
    "loads_lenient",
    "parse",
    "split_reasoning",
]
