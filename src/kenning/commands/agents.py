"""The agent integrations' commands: `kenning install`/`uninstall` (registering kenning in each agent's
configuration) and `kenning gate` (Claude Code's search-first hook). `kenning mcp` starts a surface, so it is the
MCP package's own (`kenning.mcp.cmd_mcp`)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


def cmd_install(args: argparse.Namespace) -> int:
    from kenning.agents import install

    return install.run(
        args.target or ["all"],
        gate=getattr(args, "gate", False),
        yes=args.yes,
        dry_run=args.dry_run,
        uninstall=args.command == "uninstall",
    )


def cmd_gate(args: argparse.Namespace) -> int:
    from kenning.agents import gate

    return gate.main(sys.stdin, sys.stdout, budget=args.budget, window_minutes=args.window)
