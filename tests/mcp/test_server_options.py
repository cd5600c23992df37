"""`agentctl mcp`'s own options: the agent templates it uses (--agents)."""

import subprocess

import pytest
from conftest import BIN, FAKE, connect, server_env

pytestmark = pytest.mark.anyio


def agents_file(path, role, text):
    path.write_text(f'[agents.{role}]\ncommand = ["{FAKE}", "sleep", "0", "{text}: {{question}}"]\n')
    return path


@pytest.mark.parametrize("where", ["--agents", "home", "xdg"])
async def test_ask_uses_the_same_agent_templates_as_the_cli(home, tmp_path, where):
    flags = []
    if where == "--agents":
        flags = ["--agents", str(agents_file(tmp_path / "agents.toml", "helper", "from --agents"))]
    elif where == "home":
        home.mkdir(mode=0o700)
        agents_file(home / "agents.toml", "helper", "from home")
    else:
        (home / "config" / "agentctl").mkdir(parents=True)
        agents_file(home / "config" / "agentctl" / "agents.toml", "helper", "from xdg")
    expected = {"--agents": "from --agents", "home": "from home", "xdg": "from xdg"}[where]
    async with connect(home, *flags) as c:
        r = await c.call_tool("ask", {"role": "helper", "question": "which template?"})
        assert not r.is_error, r.content[0].text
        assert r.structured_content["summary"] == f"{expected}: which template?"


@pytest.mark.parametrize("content,says", [(None, "does not exist"), ("command = [", "is not valid")])
def test_a_missing_or_broken_agents_file_is_refused_at_start(home, tmp_path, content, says):
    file = tmp_path / "agents.toml"
    if content is not None:
        file.write_text(content)
    out = subprocess.run(
        [BIN, "--home", str(home), "--agents", str(file), "mcp"],
        input="",
        capture_output=True,
        text=True,
        env=server_env(home),
        timeout=30,
    )
    assert out.returncode == 2, out
    assert out.stdout == ""
    assert str(file) in out.stderr and says in out.stderr, out.stderr
