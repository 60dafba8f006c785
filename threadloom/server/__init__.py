"""The MCP surface: tools, resources and prompts over stdio, the daemon socket and HTTP."""
