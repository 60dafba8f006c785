"""threadloom: persistent memory and coordination for AI coding agents, over MCP.

Importing this package does nothing but define the version: the bridge that
agent CLIs start per conversation imports it, and must stay fast.
"""

__version__ = "0.1.0"
