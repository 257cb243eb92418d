"""The LLM layer: an OpenAI-compatible client that always speaks native tool calls to its caller
(client.py), its errors, stream parsing, text tool calls and provider fallback."""
