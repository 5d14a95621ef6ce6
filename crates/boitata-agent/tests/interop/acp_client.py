#!/usr/bin/env python3
"""Drive boitata-agent through one prompt turn with the official ACP Python SDK.

A client nobody on the Boitata project wrote (`agent-client-protocol` from PyPI, see
scripts/setup-acp-python.sh) connects to the agent, over TCP or by starting it with
--stdio, and runs: initialize, authenticate (when the agent offers `boitata-secret`;
the secret comes from $BOITATA_AGENT_SECRET and travels in `_meta.boitata.secret`),
session/new, session/prompt. It prints one JSON object on stdout: what the agent said
in initialize, every session/update as the SDK parsed it, and the prompt response.

    acp_client.py tcp --addr 127.0.0.1:4000 --cwd /work/repo --prompt "fix it"
    acp_client.py stdio --cwd /work/repo --prompt "fix it" -- boitata-agent --stdio

Exit status 0 when the turn completed (whatever its stop reason), 1 on any error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

import acp
from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, spawn_agent_process, text_block
from acp.schema import ClientCapabilities, Implementation

AUTH_METHOD = "boitata-secret"


class Recorder:
    """An ACP client that records every session/update it receives, in order."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(
            {
                "session_id": session_id,
                "update": update.model_dump(mode="json", by_alias=True, exclude_none=True),
            }
        )

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise acp.RequestError.method_not_found("session/request_permission")


async def drive(
    conn: Any, recorder: Recorder, cwd: str, prompt: str, expect_refusal: bool = False
) -> dict[str, Any]:
    init = await conn.initialize(
        protocol_version=PROTOCOL_VERSION,
        client_capabilities=ClientCapabilities(),
        client_info=Implementation(name="acp-python-interop", version="1"),
    )
    methods = [method.id for method in (init.auth_methods or [])]
    if AUTH_METHOD in methods:
        secret = os.environ.get("BOITATA_AGENT_SECRET", "")
        await conn.authenticate(method_id=AUTH_METHOD, boitata={"secret": secret})
    if expect_refusal:
        # The agent cannot serve sessions: report the error the SDK raised for it.
        try:
            await conn.new_session(cwd=cwd, mcp_servers=[])
        except RequestError as error:
            return {
                "protocol_version": init.protocol_version,
                "agent_name": init.agent_info.name if init.agent_info else None,
                "refused": error.to_error_obj(),
            }
        raise SystemExit("session/new was accepted; a refusal was expected")
    session = await conn.new_session(cwd=cwd, mcp_servers=[])
    response = await conn.prompt(session_id=session.session_id, prompt=[text_block(prompt)])
    return {
        "protocol_version": init.protocol_version,
        "agent_name": init.agent_info.name if init.agent_info else None,
        "auth_methods": methods,
        "session_id": session.session_id,
        "updates": recorder.updates,
        "response": response.model_dump(mode="json", by_alias=True, exclude_none=True),
    }


async def over_tcp(args: argparse.Namespace) -> dict[str, Any]:
    host, _, port = args.addr.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port), limit=50 * 1024 * 1024)
    recorder = Recorder()
    conn = connect_to_agent(recorder, writer, reader)
    try:
        return await drive(conn, recorder, args.cwd, args.prompt, args.expect_refusal)
    finally:
        await conn.close()


async def over_stdio(args: argparse.Namespace) -> dict[str, Any]:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise SystemExit("stdio: give the agent command after --")
    recorder = Recorder()
    async with spawn_agent_process(
        recorder,
        command[0],
        *command[1:],
        # Like an editor: only what the SDK passes by default, unless told otherwise.
        env=None if args.default_env else dict(os.environ),
        # The agent's logs go to our stderr rather than a pipe nobody drains.
        transport_kwargs={"stderr": None},
    ) as (conn, _process):
        return await drive(conn, recorder, args.cwd, args.prompt, args.expect_refusal)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="transport", required=True)
    tcp = sub.add_parser("tcp", help="connect to an agent listening on HOST:PORT")
    tcp.add_argument("--addr", required=True)
    stdio = sub.add_parser("stdio", help="start the agent and talk over its stdin/stdout")
    stdio.add_argument("command", nargs=argparse.REMAINDER)
    for p in (tcp, stdio):
        p.add_argument("--cwd", required=True)
        p.add_argument("--prompt", required=True)
        p.add_argument("--expect-refusal", action="store_true",
                       help="expect session/new to fail; report its error")
    stdio.add_argument("--default-env", action="store_true",
                       help="start the agent with the SDK's default (trimmed) environment")
    args = parser.parse_args()
    try:
        result = asyncio.run(over_tcp(args) if args.transport == "tcp" else over_stdio(args))
    except Exception as error:  # noqa: BLE001: report anything, then fail
        print(f"acp_client.py: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
