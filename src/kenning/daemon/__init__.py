"""The kenning daemon: one resident process per user that keeps models loaded, watches the roots it serves,
keeps their indexes fresh, and answers the CLI (Unix socket), agents (MCP over loopback HTTP) and a status page.
"""
