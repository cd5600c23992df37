"""Native MCP tasks (extension `io.modelcontextprotocol/tasks`, protocol 2026-07-28), spoken as
raw JSON-RPC: no SDK client here implements the extension, and these tests check its wire
shapes. Each request carries its own `_meta`, as a stateless 2026-07-28 client sends it."""

import json
import pathlib
import queue
import signal
import subprocess
import threading
import time

import pytest
from conftest import BIN, FAKE, agent_pid, alive, cli, record, server_env

EXT = "io.modelcontextprotocol/tasks"
NOW = "2026-07-28"


def meta(version=NOW, tasks=True, elicitation=False):
    caps = {}
    if tasks:
        caps["extensions"] = {EXT: {}}
    if elicitation:
        caps["elicitation"] = {}
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": caps,
    }


class Raw:
    """`agentctl mcp` on a home, driven by hand over stdio."""

    def __init__(self, home, *flags):
        self.proc = subprocess.Popen(
            [BIN, "--home", str(home), "mcp", "--allow-run", *flags],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=server_env(home),
        )
        self.replies = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "id" in msg and "method" not in msg:
                self.replies.put(msg)

    def send(self, method, params=None, **meta_kw):
        """Send a request without waiting for its answer."""
        self.next_id += 1
        params = dict(params or {})
        if meta_kw.get("version", NOW) is not None:
            params.setdefault("_meta", meta(**meta_kw))
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}) + "\n")
        self.proc.stdin.flush()

    def request(self, method, params=None, **meta_kw):
        """The whole JSON-RPC answer (`result` or `error`) to one request (earlier ones sent
        without waiting are skipped)."""
        self.send(method, params, **meta_kw)
        while True:
            msg = self.replies.get(timeout=60)  # a hang guard
            if msg.get("id") == self.next_id:
                return msg

    def result(self, method, params=None, **meta_kw):
        msg = self.request(method, params, **meta_kw)
        assert "result" in msg, msg
        return msg["result"]

    def call(self, name, arguments, **meta_kw):
        return self.result("tools/call", {"name": name, "arguments": arguments}, **meta_kw)

    def get(self, task_id, **meta_kw):
        return self.result("tasks/get", {"taskId": task_id}, **meta_kw)

    def until(self, task_id, done, limit=60.0, **meta_kw):
        """`tasks/get` until `done(task)` holds; the last answer. The limit is a hang guard."""
        deadline = time.monotonic() + limit
        while True:
            t = self.get(task_id, **meta_kw)
            if done(t):
                return t
            assert time.monotonic() < deadline, t
            time.sleep(t.get("pollIntervalMs", 1000) / 1000 / 4)

    def close(self):
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


@pytest.fixture
def raw(home):
    servers = []

    def start(*flags, on=None):
        s = Raw(on or home, *flags)
        servers.append((s, pathlib.Path(on or home)))
        return s

    yield start
    for s, _ in servers:
        if s.proc.poll() is None:
            s.close()
    # Nothing a test started outlives it, whatever it asserted.
    for h in {h for _, h in servers}:
        for t in cli(h, "list", "--status", "running")["tasks"]:
            cli(h, "halt", t["token"], "--grace", "0.5s")


def final(t):
    return t["status"] in ("completed", "cancelled", "failed")


def test_discovery_offers_the_extension_and_initialize_does_not(raw):
    s = raw()
    d = s.result("server/discover")
    assert NOW in d["supportedVersions"]
    assert d["capabilities"]["extensions"] == {EXT: {}}
    init = s.result(
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {"extensions": {EXT: {}}}, "clientInfo": {"name": "t", "version": "0"}},
        version=None,
    )
    assert init["protocolVersion"] == "2025-11-25"
    assert "extensions" not in init["capabilities"], init


def test_ask_returns_a_task_at_once_then_completed_with_the_answer(raw, home):
    s = raw()
    t0 = time.monotonic()
    created = s.call("ask", {"role": "worker", "question": "sleep 4"})
    assert created["resultType"] == "task" and created["status"] == "working", created
    assert time.monotonic() - t0 < 10  # a hang guard: the task itself takes 4 s
    task_id = created["taskId"]
    assert len(task_id) == 32 and int(task_id, 16) >= 0
    token = created["statusMessage"].split()[2]
    assert record(home, token)["role"] == "worker"
    assert created["ttlMs"] is None and created["pollIntervalMs"] >= 1000
    working = s.get(task_id)
    assert working["resultType"] == "complete" and working["taskId"] == task_id
    assert working["status"] == "working" and token in working["statusMessage"], working
    done = s.until(task_id, final)
    assert done["status"] == "completed", done
    assert done["result"]["isError"] is False
    assert done["result"]["structuredContent"]["summary"] == "slept 4"
    assert done["result"]["structuredContent"]["token"] == token
    assert "slept 4" in done["result"]["content"][0]["text"]
    assert done["lastUpdatedAt"] >= done["createdAt"]


def test_a_quick_task_is_answered_directly_and_a_failed_one_completes_with_is_error(raw):
    s = raw()
    quick = s.call("run", {"command": ["echo", "quick"]})
    if quick["resultType"] == "task":
        # Only a machine too loaded to end `echo` within a second gets here: then it is a task.
        quick = s.until(quick["taskId"], final)["result"]
    assert quick["resultType"] == "complete" and quick["structuredContent"]["status"] == "completed", quick
    created = s.call("run", {"command": ["sh", "-c", "sleep 2; echo broken; exit 3"]})
    assert created["resultType"] == "task", created
    done = s.until(created["taskId"], final)
    assert done["status"] == "completed" and done["result"]["isError"] is True, done
    assert done["result"]["structuredContent"]["exit_code"] == 3


def test_cancel_halts_the_task_and_leaves_it_cancelled(raw, home):
    s = raw()
    created = s.call("run", {"command": [FAKE, "tick", "300", "0.1"], "async": True})
    task_id = created["taskId"]
    token = created["statusMessage"].split()[2]
    pid = agent_pid(home, token)
    assert alive(pid)
    assert s.result("tasks/cancel", {"taskId": task_id}) == {"resultType": "complete"}
    done = s.until(task_id, final)
    assert done["status"] == "cancelled" and token in done["statusMessage"], done
    assert "result" not in done
    assert not alive(pid)
    # Cancelling what has ended changes nothing.
    assert s.result("tasks/cancel", {"taskId": task_id}) == {"resultType": "complete"}
    assert s.get(task_id)["status"] == "cancelled"


def test_unknown_and_foreign_task_ids_are_invalid_params(raw, tmp_path):
    s = raw()
    other = raw(on=tmp_path / "other-home")
    foreign = other.call("run", {"command": [FAKE, "tick", "300", "0.1"], "async": True})["taskId"]
    for task_id in ("0" * 32, foreign, "not-a-task", "../" * 11):
        for method in ("tasks/get", "tasks/cancel"):
            err = s.request(method, {"taskId": task_id})["error"]
            assert err["code"] == -32602 and "no task" in err["message"], err
    other.request("tasks/cancel", {"taskId": foreign})


def test_without_the_extension_or_on_2025_11_25_nothing_changes(raw):
    s = raw()
    plain = s.call("ask", {"role": "worker", "question": "sleep 30", "async": True}, tasks=False)
    assert "resultType" not in plain or plain["resultType"] == "complete"
    assert plain["structuredContent"]["status"] == "starting" and "`await`" in plain["structuredContent"]["next"]
    err = s.request("tasks/get", {"taskId": "0" * 32}, tasks=False)["error"]
    assert err["code"] == -32021, err
    s.call("halt", {"token": plain["structuredContent"]["token"], "grace_secs": 0.5}, tasks=False)

    # An initialize session, whether or not its client lists the extension: no tasks there.
    for caps in ({"extensions": {EXT: {}}}, {}):
        legacy = raw()
        init = {"protocolVersion": "2025-11-25", "capabilities": caps, "clientInfo": {"name": "t", "version": "0"}}
        legacy.result("initialize", init, version=None)
        legacy.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        r = legacy.call("ask", {"role": "worker", "question": "sleep 30", "async": True}, version=None)
        assert "taskId" not in r and r["structuredContent"]["status"] == "starting", r
        for method in ("tasks/get", "tasks/cancel"):
            err = legacy.request(method, {"taskId": "0" * 32}, version=None)["error"]
            assert err["code"] == -32601, (caps, method, err)
        legacy.call("halt", {"token": r["structuredContent"]["token"], "grace_secs": 0.5}, version=None)


def test_a_task_outlives_the_server_that_handed_it_out_and_goes_with_prune(raw, home):
    first = raw()
    created = first.call("ask", {"role": "worker", "question": "sleep 3"})
    assert created["resultType"] == "task"
    first.close()
    second = raw()
    done = second.until(created["taskId"], final)
    assert done["status"] == "completed" and done["result"]["structuredContent"]["summary"] == "slept 3", done
    assert cli(home, "prune", "--keep", "0")["count"] == 1
    err = second.request("tasks/get", {"taskId": created["taskId"]})["error"]
    assert err["code"] == -32602, err


def asker(question, choices="main,dev"):
    return ["sh", "-c", f"a=$({BIN} ask-lead '{question}' --choices {choices} --timeout 120s) && echo \"> chose $a\""]


def test_a_question_is_an_input_request_answered_with_tasks_update(raw):
    s = raw()
    created = s.call("run", {"command": asker("which branch?"), "async": True}, elicitation=True)
    task_id = created["taskId"]
    # Each request says what its client can do: a poll without elicitation gets the message only.
    asked = s.until(task_id, lambda t: "asks" in t["statusMessage"])
    assert asked["status"] == "working" and "inputRequests" not in asked, asked
    asked = s.get(task_id, elicitation=True)
    assert asked["status"] == "input_required", asked
    [(key, req)] = asked["inputRequests"].items()
    assert req["method"] == "elicitation/create" and "which branch?" in req["params"]["message"]
    assert req["params"]["requestedSchema"]["properties"]["answer"]["enum"] == ["main", "dev"]
    assert "which branch?" in asked["statusMessage"]
    update = lambda responses: s.request("tasks/update", {"taskId": task_id, "inputResponses": responses})
    # A key that is not outstanding is ignored; a dismissed form leaves the question open; an
    # answer that cannot be used is refused, and the question stays open too.
    assert update({"q0000000000": {"action": "accept", "content": {"answer": "main"}}})["result"] == {"resultType": "complete"}
    assert update({key: {"action": "cancel"}})["result"] == {"resultType": "complete"}
    for bad in ({"answer": ""}, {"answer": 3}, {}):
        err = update({key: {"action": "accept", "content": bad}})["error"]
        assert err["code"] == -32602 and key in err["message"], err
    assert s.get(task_id, elicitation=True)["inputRequests"].keys() == {key}
    ack = s.result("tasks/update", {"taskId": task_id, "inputResponses": {key: {"action": "accept", "content": {"answer": "dev"}}}})
    assert ack == {"resultType": "complete"}
    done = s.until(task_id, final)
    assert done["status"] == "completed" and done["result"]["structuredContent"]["summary"] == "chose dev", done


def test_without_elicitation_the_question_stays_in_the_status_message_for_reply(raw):
    s = raw()
    created = s.call("run", {"command": asker("deploy now?", "yes,no"), "async": True})
    task_id = created["taskId"]
    token = created["statusMessage"].split()[2]
    asked = s.until(task_id, lambda t: "asks" in t["statusMessage"])
    assert asked["status"] == "working" and "inputRequests" not in asked, asked
    assert "deploy now? [yes, no]" in asked["statusMessage"] and "`reply`" in asked["statusMessage"]
    r = s.call("reply", {"token": token, "answer": "no"})
    assert not r["isError"], r
    done = s.until(task_id, final)
    assert done["result"]["structuredContent"]["summary"] == "chose no", done


@pytest.mark.parametrize("end", ["stdin", "SIGINT", "SIGTERM"])
def test_the_server_does_not_exit_before_a_cancelled_task_is_halted(raw, home, end):
    s = raw()
    # A task slow to stop: SIGTERM is trapped, so the halt waits out the grace, then SIGKILLs.
    stubborn = ["sh", "-c", "trap 'echo term' TERM; while :; do sleep 0.1; done"]
    created = s.call("run", {"command": stubborn, "async": True})
    token = created["statusMessage"].split()[2]
    pid = agent_pid(home, token)
    # Claude Code sends its cancel twice at once, and stops its server with SIGINT at `/exit`.
    cancel = {"taskId": created["taskId"]}
    s.send("tasks/cancel", cancel)
    assert s.result("tasks/cancel", cancel) == {"resultType": "complete"}
    if end == "stdin":
        s.close()
    else:
        s.proc.send_signal(getattr(signal, end))
        assert s.proc.wait(timeout=60) == 0
    assert record(home, token)["ended"]["outcome"]["status"] == "cancelled"
    assert not alive(pid)


def test_every_question_waiting_is_an_input_request(raw, tmp_path):
    s = raw()
    a, b = tmp_path / "a", tmp_path / "b"
    ask = f"{BIN} ask-lead"
    script = f"({ask} 'first?' --timeout 120s > {a}) & {ask} 'second?' --timeout 120s > {b}; wait; echo \"> $(cat {a}) $(cat {b})\""
    created = s.call("run", {"command": ["sh", "-c", script], "async": True}, elicitation=True)
    task_id = created["taskId"]
    asked = s.until(task_id, lambda t: len(t.get("inputRequests", {})) == 2, elicitation=True)
    by_text = {r["params"]["message"].split("asks: ")[1]: k for k, r in asked["inputRequests"].items()}
    assert by_text.keys() == {"first?", "second?"}, asked
    # Free text, not a choice: an empty answer is not one.
    assert all(r["params"]["requestedSchema"]["properties"]["answer"]["minLength"] == 1 for r in asked["inputRequests"].values())
    answers = {by_text["first?"]: "one", by_text["second?"]: "two"}
    responses = {k: {"action": "accept", "content": {"answer": v}} for k, v in answers.items()}
    s.result("tasks/update", {"taskId": task_id, "inputResponses": responses})
    done = s.until(task_id, final)
    assert done["result"]["structuredContent"]["summary"] == "one two", done


def test_each_turn_of_a_followed_up_task_is_a_task_of_its_own(raw, home):
    """A follow-up (`ask` with `to`) is handed out as a task for its turn; the task of the
    earlier turn keeps that turn's end while the next one runs, and after."""
    claude = str(pathlib.Path(FAKE).parent / "stream" / "claude")
    home.mkdir(parents=True, exist_ok=True)
    (home / "agents.toml").write_text(f'[agents.chat]\ncommand = ["{claude}", "steps", "{{question}}"]\n')
    gates = [home / "gate1", home / "gate2"]
    s = raw()
    first = s.call("ask", {"role": "chat", "question": str(gates[0])})
    assert first["resultType"] == "task", first
    token = first["statusMessage"].split()[2]
    gates[0].write_text("")
    one = s.until(first["taskId"], final)
    assert one["status"] == "completed" and one["result"]["structuredContent"]["token"] == token, one
    second = s.call("ask", {"to": token, "question": str(gates[1])})
    assert second["resultType"] == "task" and second["taskId"] != first["taskId"], second
    assert s.get(second["taskId"])["status"] == "working"
    # The first turn's task: still that turn, ended, while the second runs.
    again = s.get(first["taskId"])
    assert again["status"] == "completed", again
    earlier = again["result"]["structuredContent"]
    assert earlier["summary"] == "All done: the change is good." and earlier["status"] == "completed", earlier
    assert "turn 1 of task" in earlier["note"], earlier
    # Cancelling the first turn's task leaves the running turn alone.
    assert s.result("tasks/cancel", {"taskId": first["taskId"]}) == {"resultType": "complete"}
    gates[1].write_text("")
    two = s.until(second["taskId"], final)
    assert two["status"] == "completed" and two["result"]["structuredContent"]["token"] == token, two
    assert "note" not in two["result"]["structuredContent"] and cli(home, "status", token)["turn"] == 2, two
    assert s.get(first["taskId"])["status"] == "completed"
