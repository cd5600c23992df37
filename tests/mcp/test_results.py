"""Results a model reads, through the official Python SDK: within the budget, the answer's
head and tail with the `logs` call for the rest, several tasks collected in few calls, and
every error naming the next tool."""

import json
import re

import pytest
from conftest import FAKE, connect

pytestmark = pytest.mark.anyio

BUDGET = 8192


def size(r):
    """The bytes of both copies of a result, as they go over the wire."""
    structured = json.dumps(r.structured_content, separators=(",", ":"), ensure_ascii=False)
    return len(structured.encode()) + sum(len(c.text.encode()) for c in r.content)


async def read_summary(c, token, offset, column):
    """Follow `logs {summary: true}` from (offset, column) to the end; the text and the calls."""
    text, calls = "", 0
    while True:
        r = await c.call_tool("logs", {"token": token, "summary": True, "offset": offset, "column": column})
        calls += 1
        assert not r.is_error and size(r) <= BUDGET, (size(r), r.content[0].text[:200])
        s = r.structured_content
        text += ("" if column else "\n") + "\n".join(s["lines"])
        if "next_offset" not in s:
            return text, calls
        offset, column = s["next_offset"], s.get("next_column", 0)


async def test_a_huge_answer_after_megabytes_of_output_comes_back_within_the_budget_and_whole_through_logs(
    home, tmp_path
):
    lines = ["ANSWER START"] + [f"answer line {i}" for i in range(2000)]
    lines += ["xé" * 100_000 + " END OF THE LONG LINE", "> a quoted line inside the answer", "ANSWER END"]
    answer = "\n".join(lines)
    (tmp_path / "answer").write_text(answer + "\n")
    script = (
        "yes 'progress: compiling something rather long' | head -c 5000000; echo; "
        f"printf '\\033[38;5;10m> \\033[0m'; cat {tmp_path / 'answer'}"
    )
    async with connect(home, "--allow-run") as c:
        r = await c.call_tool("run", {"command": ["sh", "-c", script], "wait_secs": 50})
        assert size(r) <= BUDGET, size(r)
        s = r.structured_content
        assert s["status"] == "completed", s
        token, summary = s["token"], s["summary"]
        assert summary.startswith("ANSWER START\nanswer line 0\n") and summary.endswith("ANSWER END"), summary[:200]
        marker = re.search(r'\[agentctl: (\d+) bytes .* left out here; read them with logs (\{.*?\})', summary)
        assert marker, summary
        call = json.loads(marker.group(2))
        assert call == {"token": token, "summary": True, "offset": call["offset"], "column": call["column"]}
        # Nothing but nulls-free fields a model can use.
        assert not any(v is None for v in s.values()) and "log_path" not in s and "started_at" not in s

        # The same for every await of it, as often as it is asked.
        for _ in range(2):
            w = await c.call_tool("await", {"token": token})
            assert size(w) <= BUDGET and w.structured_content["summary"] == summary

        # Reading from the head's end through the marker's call gives back the whole answer.
        head = summary[: summary.index("\n[agentctl:")]
        rest, calls = await read_summary(c, token, call["offset"], call["column"])
        assert head + rest == answer
        assert calls > 300_000 // BUDGET, calls


async def test_three_tasks_are_collected_in_few_calls_with_their_answers_whole(home, tmp_path):
    answers = {}
    async with connect(home, "--allow-run") as c:
        tokens = {}
        for secs in (1, 2, 4):
            answer = f"answer of the {secs} s task\n" + f"{secs}" * 2000
            (tmp_path / f"a{secs}").write_text(answer)
            script = f"sleep {secs}; printf '\\033[38;5;10m> \\033[0m'; cat {tmp_path / f'a{secs}'}"
            r = await c.call_tool("run", {"command": ["sh", "-c", script], "async": True})
            tokens[secs] = r.structured_content["token"]
            answers[tokens[secs]] = answer
        calls = 3
        # await of all three returns the quickest first, the others still running.
        first = await c.call_tool("await", {"tokens": [tokens[4], tokens[2], tokens[1]]})
        calls += 1
        a = first.structured_content
        assert a["tasks"][0]["token"] == tokens[1] and a["tasks"][0]["summary"] == answers[tokens[1]], a
        assert {t["token"] for t in a["tasks"][1:]} == {tokens[2], tokens[4]}
        assert all(t["status"] == "running" for t in a["tasks"][1:]) and "`await`" in a["next"]
        # Then wait_for_event: each task_finished carries the whole 2 KB answer.
        got = {}
        while len(got) < 3:
            e = (await c.call_tool("wait_for_event", {"timeout_secs": 30})).structured_content
            calls += 1
            assert e["type"] == "task_finished", e
            got[e["token"]] = e["summary"]
        assert got == answers
        assert calls <= 7, calls


async def test_a_finished_await_of_a_short_answer_is_small(home):
    async with connect(home, "--allow-run") as c:
        r = await c.call_tool("run", {"command": [FAKE, "sleep", "0", "ok"]})
        w = await c.call_tool("await", {"token": r.structured_content["token"]})
        structured = json.dumps(w.structured_content, separators=(",", ":"))
        assert w.structured_content["summary"] == "ok" and len(structured) < 200, structured


NEXT_TOOL = re.compile(r"`(ask|await|halt|list|logs|wait_for_event|run)`")


async def test_every_error_an_orchestrator_meets_names_the_next_tool(home):
    async with connect(home, "--allow-run") as c:
        failed = await c.call_tool("run", {"command": [FAKE, "fail", "3"]})
        missing = await c.call_tool("run", {"command": ["no-such-agent-here"]})
        unknown = await c.call_tool("await", {"token": "abcdef"})
        bad_role = await c.call_tool("ask", {"role": "no/such", "question": "x"})
        halted = await c.call_tool("halt", {"token": failed.structured_content["token"]})
        for name, r in [("failed", failed), ("missing", missing), ("unknown", unknown), ("bad_role", bad_role)]:
            assert r.is_error, name
            assert NEXT_TOOL.search(r.content[0].text), (name, r.content[0].text)
        # Bad arguments: the same call again, corrected.
        for tool, args in [("run", {"command": []}), ("await", {}), ("logs", {"token": "abcdef", "summary": True})]:
            r = await c.call_tool(tool, args)
            text = r.content[0].text
            assert r.is_error and (NEXT_TOOL.search(text) or "same tool call again" in text), (tool, text)
        assert "`logs`" in failed.structured_content["next"]
        # Halting what already ended is not an error: the task as it ended, and a note.
        assert not halted.is_error and "nothing was stopped" in halted.structured_content["note"]


async def test_the_tool_list_and_instructions_stay_small(home):
    for flags in ((), ("--allow-run",)):
        async with connect(home, *flags) as c:
            tools = (await c.list_tools()).tools
            listed = json.dumps([t.model_dump(by_alias=True, exclude_none=True) for t in tools], separators=(",", ":"))
            total = len(listed.encode()) + len(c.instructions.encode())
            # Every client reads the list and a model pays for each byte: a budget of 8 KiB (7.9 KiB
            # with ask's and run's `budget` and the `usage` tool).
            assert total < 8 * 1024, (flags, total)
            for word in ("async", "wait_for_event", "await", "logs", "question"):
                assert word in c.instructions, word


async def test_a_rate_limited_run_is_run_again_and_the_result_counts_the_attempts(home, tmp_path):
    counter = tmp_path / "runs"
    home.mkdir(parents=True, exist_ok=True)
    (home / "agents.toml").write_text(
        f'[agents.limited]\ncommand = ["{FAKE}", "limited", "{counter}", "2"]\n'
        'retry_on = { exit = [75] }\nbackoff = "100ms"\n'
    )
    async with connect(home) as c:
        r = await c.call_tool("ask", {"role": "limited", "question": "go", "wait_secs": 30})
        s = r.structured_content
        assert not r.is_error and (s["status"], s["attempts"], s["summary"]) == ("completed", 2, "answered on run 2"), s
        assert "after 2 runs" in r.content[0].text
        # One run: no `attempts` to read.
        r = await c.call_tool("ask", {"role": "limited", "question": "again", "wait_secs": 30})
        assert "attempts" not in r.structured_content, r.structured_content
