"""Clients for the MCP servers configured in `mcp_servers`; their tools become deferred lane tools.

This package knows nothing of the lane's Tool type (tools -> mcp, never back): `manager.McpManager`
hands out plain `connection.McpTool` descriptors and stack/tools/mcp_tools.py adapts them. Only
`config` is importable without the `mcp` SDK (the `mcp` extra), so a lane without MCP servers never
needs it; hence no re-exports here.
"""
