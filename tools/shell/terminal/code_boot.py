"""Bootstrap of an execute_code script, run as `python3 -c <this file's text> <script>`:
gives the script a `tools` object whose calls go to the gateway and back.

Standalone (standard library only; it runs inside the sandbox, a container or a remote
host). Requests go out on stderr as one line each, marked with a per-run token; answers
come back on stdin, which the script itself then sees as empty.
"""

import json
import os
import sys


class ToolCallError(Exception):
    """A tool call that the gateway refused or that failed; the message says why."""


class _Tools:
    def __init__(self) -> None:
        self._mark = b"\x1e" + os.environ.pop("CHATGATE_RPC_TOKEN", "").encode() + b" "
        self._answers = os.fdopen(os.dup(0), "rb")
        self._requests = os.fdopen(os.dup(2), "wb", buffering=0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        self._count = 0

    def call(self, name: str, **args: object) -> str:
        """Run the tool `name` with `args` as the model would; returns its text result."""
        self._count += 1
        request = json.dumps({"id": self._count, "tool": name, "args": args}, default=str)
        sys.stdout.flush()
        self._requests.write(self._mark + request.encode() + b"\n")
        line = self._answers.readline()
        if not line:
            raise ToolCallError("the gateway closed the tool channel")
        answer = json.loads(line)
        if not answer.get("ok"):
            raise ToolCallError(answer.get("error") or f"{name} failed")
        return str(answer.get("result", ""))

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda **args: self.call(name, **args)


def _main() -> None:
    source = sys.argv[1]
    sys.argv = ["script"]
    namespace = {"__name__": "__main__", "tools": _Tools(), "ToolCallError": ToolCallError}
    exec(compile(source, "<script>", "exec"), namespace)


_main()
