"""MCP client: the servers in `mcp.servers` connected in the background, their tools offered to
the model like built-in ones (`mcp_<server>_<tool>`, policy groups `mcp` and `mcp:<server>`).

Importing this package does not import the MCP SDK (an optional extra); `install` does.
"""
