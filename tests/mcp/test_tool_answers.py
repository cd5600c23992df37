"""What the tools answer at their edges: numbers out of range, halting what already ended,
refusals that name the next tool (never a command line), and tokens sent as numbers."""

import pytest
from conftest import connect

pytestmark = pytest.mark.anyio


async def test_a_token_sent_as_a_number_is_accepted(home):
    # Clients that coerce `key=value` arguments send an all-digit token (as older versions
    # made them) as a number; it is read as the zero-padded token it was.
    async with connect(home) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        for name in ("await", "halt", "logs"):
            assert tools[name].input_schema["properties"]["token"]["type"] == "string", name
            r = await c.call_tool(name, {"token": 4217})
            assert r.is_error and "no task 004217" in r.content[0].text, (name, r.content[0].text)
        for bad in (-1, 1234567, 4.5, True, None):
            r = await c.call_tool("await", {"token": bad})
            assert r.is_error and "no task" not in r.content[0].text, (bad, r.content[0].text)
