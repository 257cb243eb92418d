"""Text tool calls written with special tokens, XML-style parameters or Python syntax, family by
family: our own cases, written from reading the parser tests of vLLM, llama.cpp and sglang
(Qwen3-Coder, GLM, MiniMax, DeepSeek, Kimi, Gemma, pythonic Llama) and their chat templates,
run with and without the offered tool names.
"""

from __future__ import annotations

import pytest

from tests.unit.textcalls_table import Case, Expect, W, check, params

DALLAS = {"city": "Dallas", "state": "TX"}

# --- Qwen3-Coder / Seed-OSS <function=...><parameter=...>, GLM <arg_key>, MiniMax/DSML invoke ---
XML_ARGS = [
    Case(
        "qwen3-coder-text-before",
        "Sure! Let me check.<tool_call>\n<function=get_weather>\n<parameter=city>\nDallas\n"
        "</parameter>\n<parameter=state>\nTX\n</parameter>\n</function>\n</tool_call>",
        "Sure! Let me check.",
        [("get_weather", DALLAS)],
    ),
    Case(
        "qwen3-coder-typed-values",
        "<tool_call>\n<function=calculate_area>\n<parameter=shape>\nrectangle\n</parameter>\n"
        '<parameter=dimensions>\n{"width": 10,\n "height": 20}\n</parameter>\n'
        "<parameter=precision>\n2\n</parameter>\n<parameter=ratio>\n0.5\n</parameter>\n"
        "<parameter=exact>\ntrue\n</parameter>\n</function>\n</tool_call>",
        None,
        [
            (
                "calculate_area",
                {
                    "shape": "rectangle",
                    "dimensions": {"width": 10, "height": 20},
                    "precision": 2,
                    "ratio": 0.5,
                    "exact": True,
                },
            )
        ],
    ),
    Case(
        "qwen3-coder-special-characters",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nDallas->TX & co <b>\n</parameter>\n"
        "</function>\n</tool_call>",
        None,
        [("get_weather", {"city": "Dallas->TX & co <b>"})],
    ),
    Case(
        "qwen3-coder-no-parameters",
        "<tool_call>\n<function=get_time>\n</function>\n</tool_call>",
        None,
        [("get_time", {})],
    ),
    Case(
        "qwen3-coder-two-calls",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nDallas\n</parameter>\n</function>\n"
        "</tool_call>\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOrlando\n"
        "</parameter>\n</function>\n</tool_call>",
        None,
        [("get_weather", {"city": "Dallas"}), ("get_weather", {"city": "Orlando"})],
    ),
    Case(
        "qwen3-coder-text-between-calls",
        "<tool_call>\n<function=get_time>\n</function>\n</tool_call>\nSome text in between.\n"
        "<tool_call>\n<function=search>\n<parameter=query>\nrust\n</parameter>\n</function>\n"
        "</tool_call>",
        "Some text in between.",
        [("get_time", {}), ("search", {"query": "rust"})],
    ),
    Case(
        "qwen3-coder-without-wrapper",
        "<function=get_weather>\n<parameter=city>\nDallas\n</parameter>\n<parameter=state>\nTX\n"
        "</parameter>\n</function>",
        None,
        [("get_weather", DALLAS)],
    ),
    Case(
        "seed-oss",
        "<seed:think>Weather needed.</seed:think><seed:tool_call>\n<function=get_weather>\n"
        "<parameter=city>Paris</parameter>\n</function>\n</seed:tool_call>",
        None,
        [("get_weather", W)],
        "Weather needed.",
    ),
    Case(
        "glm-arg-keys",
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
        "<arg_key>date</arg_key>\n<arg_value>2024-06-27</arg_value>\n</tool_call>",
        None,
        [("get_weather", {"city": "Beijing", "date": "2024-06-27"})],
    ),
    Case(
        "glm-two-calls-glued",
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
        "</tool_call><tool_call>get_weather\n<arg_key>city</arg_key>\n"
        "<arg_value>Shanghai</arg_value>\n</tool_call>",
        None,
        [("get_weather", {"city": "Beijing"}), ("get_weather", {"city": "Shanghai"})],
    ),
    Case(
        "glm-array-value",
        '<tool_call>todo_write\n<arg_key>todos</arg_key>\n<arg_value>[{"id": "1", "task": "a"}, '
        '{"id": "2", "task": "b"}]</arg_value>\n</tool_call>',
        None,
        [("todo_write", {"todos": [{"id": "1", "task": "a"}, {"id": "2", "task": "b"}]})],
    ),
    Case(
        "glm-array-value-escaped",
        '<tool_call>todo_write\n<arg_key>todos</arg_key>\n<arg_value>[{\\"id\\": \\"1\\"}]'
        "</arg_value>\n</tool_call>",
        None,
        [("todo_write", {"todos": [{"id": "1"}]})],
    ),
    Case(
        "glm-no-arguments",
        "<tool_call>get_time\n</tool_call>",
        None,
        [("get_time", {})],
    ),
    Case(
        "minimax-invoke",
        '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris</parameter>'
        '\n<parameter name="days">3</parameter>\n</invoke>\n</minimax:tool_call>',
        None,
        [("get_weather", {"city": "Paris", "days": 3})],
    ),
    Case(
        "function-calls-two-invokes",
        'Checking.\n<function_calls>\n<invoke name="get_time">\n</invoke>\n<invoke name="search">\n'
        '<parameter name="query">rust</parameter>\n</invoke>\n</function_calls>',
        "Checking.",
        [("get_time", {}), ("search", {"query": "rust"})],
    ),
    Case(
        "deepseek-dsml",
        'Let me look.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
        '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        "Let me look.",
        [("get_weather", {"city": "Paris", "days": 3})],
    ),
    Case(
        "dsml-string-attribute-keeps-text",
        '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="send_email">\n'
        '<｜DSML｜parameter name="zip" string="true">02134</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
        None,
        [("send_email", {"zip": "02134"})],
    ),
    Case(
        "parameter-tag-mention",
        "The <parameter=x> tag holds one argument.",
        "The <parameter=x> tag holds one argument.",
        [],
    ),
]

# --- DeepSeek, Kimi K2, Granite, Gemma and other special-token formats ------------------------
TOKENS = [
    Case(
        "deepseek-r1",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
        '{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        None,
        [("get_weather", W)],
    ),
    Case(
        "deepseek-r1-after-think",
        "<think>Need data.</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
        '<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜>'
        "<｜tool▁calls▁end｜>",
        None,
        [("get_weather", W)],
        "Need data.",
    ),
    Case(
        "deepseek-v3-two-calls",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
        '{"city": "Shanghai"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function'
        '<｜tool▁sep｜>search\n```json\n{"query": "rust"}\n```<｜tool▁call▁end｜>'
        "<｜tool▁calls▁end｜>",
        None,
        [("get_weather", {"city": "Shanghai"}), ("search", {"query": "rust"})],
    ),
    Case(
        "deepseek-short-begin-token",
        '<｜tool▁calls｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}\n```'
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        None,
        [("get_weather", W)],
    ),
    Case(
        "deepseek-v31",
        "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
        '{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        "Checking.",
        [("get_weather", W)],
    ),
    Case(
        "deepseek-token-mentioned-in-reasoning",
        "<think>It starts with <｜tool▁calls▁begin｜> and ends</think>No tool needed.",
        "No tool needed.",
        [],
        "It starts with <｜tool▁calls▁begin｜> and ends",
    ),
    Case(
        "kimi-k2-one",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>',
        None,
        [("get_weather", W)],
    ),
    Case(
        "kimi-k2-two-after-text",
        "Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_call_begin|>'
        'functions.search:1<|tool_call_argument_begin|>{"query": "rust"}<|tool_call_end|>'
        "<|tool_calls_section_end|>",
        "Let me check.",
        [("get_weather", W), ("search", {"query": "rust"})],
    ),
    Case(
        "kimi-k2-without-call-begin-stays-text",
        'bad_tool:0<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|>',
        'bad_tool:0<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|>',
        [],
    ),
    Case(
        "granite-tool-call-token",
        '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
        None,
        [("get_weather", W)],
    ),
    Case(
        "gemma4-turn-closes-call",
        '<|tool_call>call:run_shell{command:<|"|>ls -la /work<|"|>}<turn|>',
        None,
        [("run_shell", {"command": "ls -la /work"})],
    ),
    Case(
        "gemma4-stray-colon",
        '<|tool_call>:call:run_shell{command:<|"|>pytest<|"|>}',
        None,
        [("run_shell", {"command": "pytest"})],
    ),
    Case(
        "gemma4-two-calls",
        '<|tool_call>call:read_file{path:<|"|>/work/Makefile<|"|>}<tool_call|>\n'
        '<|tool_call>call:run_shell{command:<|"|>make -j8<|"|>}<tool_call|>',
        None,
        [("read_file", {"path": "/work/Makefile"}), ("run_shell", {"command": "make -j8"})],
    ),
    Case(
        "gemma4-thought-channel-then-bare-call",
        "<|channel>thought\nI need the entry file.\n<channel|>"
        'call:read_file{path:<|"|>/work/src/entry.c<|"|>}',
        None,
        [("read_file", {"path": "/work/src/entry.c"})],
        "I need the entry file.",
    ),
    Case(
        "gemma4-bare-call-after-prose-line",
        'some prose\ncall:run_shell{command:<|"|>make -j8<|"|>}',
        "some prose",
        [("run_shell", {"command": "make -j8"})],
    ),
    Case(
        "gemma4-call-tag",
        '<call>get_weather{city:<|"|>Paris<|"|>}',
        None,
        [("get_weather", W)],
    ),
    Case(
        "gemma4-hyphen-and-dot-names",
        'call:web-search{query:<|"|>gemma<|"|>}\ncall:fs.read_file{path:<|"|>/a<|"|>}',
        None,
        [("web-search", {"query": "gemma"}), ("fs.read_file", {"path": "/a"})],
    ),
    Case(
        "gemma4-bare-call-unknown-name",
        'call:format_disk{drive:<|"|>C<|"|>}',
        None,
        [("format_disk", {"drive": "C"})],
        named=Expect('call:format_disk{drive:<|"|>C<|"|>}', []),
    ),
    Case(
        "call-word-mid-sentence",
        "You can call:search{query} from the menu.",
        "You can call:search{query} from the menu.",
        [],
    ),
    Case(
        "functiongemma-numeric-and-text-before",
        "Let me check.<start_function_call>call:get_weather{city:<escape>London<escape>,days:3}"
        "<end_function_call>",
        "Let me check.",
        [("get_weather", {"city": "London", "days": 3})],
    ),
]

# --- Pythonic calls (Llama 3.2 / 4, Gemma 3 tool_code, OLMo 3) --------------------------------
SIMPLE = "get_weather(city='San Francisco', unit='celsius')"
SIMPLE_ARGS = {"city": "San Francisco", "unit": "celsius"}
PYTHONIC = [
    Case("simple", f"[{SIMPLE}]", None, [("get_weather", SIMPLE_ARGS)]),
    Case(
        "more-types",
        "[send_email(to='a@b.c', retries=3, meta={'k': 'v'}, cc=None, urgent=True, tags=['x'])]",
        None,
        [
            (
                "send_email",
                {
                    "to": "a@b.c",
                    "retries": 3,
                    "meta": {"k": "v"},
                    "cc": None,
                    "urgent": True,
                    "tags": ["x"],
                },
            )
        ],
    ),
    Case("no-arguments", "[get_time()]", None, [("get_time", {})]),
    Case(
        "empty-containers",
        "[todo_write(todos=[], meta={})]",
        None,
        [("todo_write", {"todos": [], "meta": {}})],
    ),
    Case(
        "escaped-strings",
        r"[get_weather(city='Martha\'s Vineyard', unit='\"cool\"')]",
        None,
        [("get_weather", {"city": "Martha's Vineyard", "unit": '"cool"'})],
    ),
    Case(
        "parallel",
        f"[{SIMPLE}, get_time()]",
        None,
        [("get_weather", SIMPLE_ARGS), ("get_time", {})],
    ),
    Case(
        "after-prose-needs-names",
        f"Here's a tool call: [{SIMPLE}]",
        f"Here's a tool call: [{SIMPLE}]",
        [],
        named=Expect("Here's a tool call:", [("get_weather", SIMPLE_ARGS)]),
    ),
    Case(
        "two-lists-in-prose-need-names",
        "[get_weather(city='Berlin')] and [search(query='restaurants')]",
        "[get_weather(city='Berlin')] and [search(query='restaurants')]",
        [],
        named=Expect(
            "and", [("get_weather", {"city": "Berlin"}), ("search", {"query": "restaurants"})]
        ),
    ),
    Case(
        "call-then-prose-needs-names",
        "[get_weather(city='Tokyo')] Here's the forecast:",
        "[get_weather(city='Tokyo')] Here's the forecast:",
        [],
        named=Expect("Here's the forecast:", [("get_weather", {"city": "Tokyo"})]),
    ),
    Case(
        "python-start-mid-text",
        "Checking Mars. <|python_start|>[get_weather(city='Mars')]<|python_end|> Then I report.",
        "Checking Mars. Then I report.",
        [("get_weather", {"city": "Mars"})],
    ),
    Case(
        "bad-sibling-dropped",
        f"[bad(x=b'z'), {SIMPLE}]",
        None,
        [("get_weather", SIMPLE_ARGS)],
    ),
    Case(
        "non-finite-sibling-dropped",
        f"[calc(x=1e999), {SIMPLE}]",
        None,
        [("get_weather", SIMPLE_ARGS)],
    ),
    Case(
        "unparsable-sibling-dropped",
        f"[{SIMPLE}, f(a='x 'y', b='z')]",
        None,
        [("get_weather", SIMPLE_ARGS)],
    ),
    Case(
        "unrecoverable-stays-text",
        "[f(a='x 'y' 'z), g(b='p 'q' 'r)]",
        "[f(a='x 'y' 'z), g(b='p 'q' 'r)]",
        [],
    ),
    Case("mismatched-brackets-stay-text", "[foo(x=1])]", "[foo(x=1])]", []),
    Case("positional-arguments-stay-text", "[f(1, 2)]", "[f(1, 2)]", []),
    Case(
        "python-fence-needs-names",
        '```python\nget_weather(city="Paris")\n```',
        '```python\nget_weather(city="Paris")\n```',
        [],
        named=Expect(None, [("get_weather", W)]),
    ),
    Case(
        "gemma3-tool-code-fence",
        'I will check.\n```tool_code\nget_weather(city="Paris")\n```',
        "I will check.",
        [("get_weather", W)],
    ),
    Case(
        "olmo3-function-calls-lines",
        '<function_calls>\nget_weather(city="Paris")\nget_time()\n</function_calls>',
        None,
        [("get_weather", W), ("get_time", {})],
    ),
]

# --- Reasoning blocks in every spelling ------------------------------------------------------
REASONING = [
    Case("think", "<think>Plan.</think>\nAnswer.", "Answer.", [], "Plan."),
    Case("thinking", "<thinking>Plan.</thinking>Answer.", "Answer.", [], "Plan."),
    Case("forced-open", "Plan.\n</think>\n\nAnswer.", "Answer.", [], "Plan."),
    Case("unclosed", "<think>Still going", None, [], "Still going"),
    Case("seed", "<seed:think>Plan.</seed:think>Answer.", "Answer.", [], "Plan."),
    Case("magistral", "[THINK]Plan.[/THINK]Answer.", "Answer.", [], "Plan."),
    Case("command-r7b", "<|START_THINKING|>Plan.<|END_THINKING|>Answer.", "Answer.", [], "Plan."),
    Case("gemma4-channel", "<|channel>thought\nPlan.<channel|>Answer.", "Answer.", [], "Plan."),
    Case(
        "think-in-backticks-is-text",
        "Models write `<think>` first.",
        "Models write `<think>` first.",
        [],
    ),
    Case(
        "reasoning-and-call-and-text",
        '<think>Need weather.</think>Checking.\n<tool_call>{"name": "get_weather", '
        '"arguments": {"city": "Paris"}}</tool_call>',
        "Checking.",
        [("get_weather", W)],
        "Need weather.",
    ),
]


@pytest.mark.parametrize(("case", "with_names"), params(XML_ARGS))
def test_xml_style_parameters(case: Case, with_names: bool) -> None:
    check(case, with_names)


@pytest.mark.parametrize(("case", "with_names"), params(TOKENS))
def test_special_token_formats(case: Case, with_names: bool) -> None:
    check(case, with_names)


@pytest.mark.parametrize(("case", "with_names"), params(PYTHONIC))
def test_pythonic_calls(case: Case, with_names: bool) -> None:
    check(case, with_names)


@pytest.mark.parametrize(("case", "with_names"), params(REASONING))
def test_reasoning_spellings(case: Case, with_names: bool) -> None:
    check(case, with_names)
