"""Fixtures for driving `agentctl mcp` with the official MCP Python SDK over stdio."""

import json
import sqlite3
import os
import pathlib
import subprocess
import time

import anyio
import pytest
from mcp import Client, StdioServerParameters

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("AGENTCTL_BIN", str(ROOT / "target" / "debug" / "agentctl"))
FAKE = str(ROOT / "fixtures" / "fake-agent")


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def home(tmp_path):
    return tmp_path / "home"


def server_env(home):
    return {
        "PATH": f"{ROOT / 'fixtures' / 'path'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "XDG_CONFIG_HOME": str(home / "config"),
        "HOME": str(home),
    }


def connect(home, *flags, mode="legacy", pidfile=None):
    """A client for a fresh `agentctl mcp` on `home`; with `pidfile`, the server writes its pid."""
    if pidfile is None:
        params = StdioServerParameters(command=BIN, args=["--home", str(home), "mcp", *flags], env=server_env(home))
    else:
        script = 'echo $$ > "$0"; exec "$@"'
        params = StdioServerParameters(
            command="sh",
            args=["-c", script, str(pidfile), BIN, "--home", str(home), "mcp", *flags],
            env=server_env(home),
        )
    return Client(params, mode=mode)


def cli(home, *args):
    """Run the agentctl CLI on `home` and parse its --json output."""
    out = subprocess.run([BIN, "--home", str(home), "--json", *args], capture_output=True, text=True, env=server_env(home))
    return json.loads(out.stdout)


def record(home, token):
    with sqlite3.connect(home / "agentctl.db", timeout=30) as db:
        (text,) = db.execute("SELECT record FROM tasks WHERE token = ?", (token,)).fetchone()
    return json.loads(text)


def agent_pid(home, token, limit=60.0):
    """The pid of task `token`'s agent, once its supervisor has recorded it (a launch hands the
    task back before its agent runs)."""
    end = time.monotonic() + limit
    while (started := record(home, token)["started"]) is None:
        assert time.monotonic() < end, f"timed out waiting for task {token} to run"
        time.sleep(0.01)
    return started["pid"]


def open_fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except FileNotFoundError:
        return 0


def alive(pid):
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def wait_until(what, cond, limit=20.0):
    """Poll `cond` until it holds, without blocking the client's event loop; a hang guard,
    not a timing claim."""
    end = time.monotonic() + limit
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        await anyio.sleep(0.01)
