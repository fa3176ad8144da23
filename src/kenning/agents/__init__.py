"""Integrations with coding agents beyond the MCP server: registering kenning in their configurations
(`install`, over `jsonedit` and the `targets` they are known by), the search-first gate hook (`gate`), and telling a
folder that is no project (`project`). Nothing here imports the engine: an install or a gate check loads no index.
"""
