"""`agentctl mcp --http`: the same tools over Streamable HTTP, for clients holding a token from
`agentctl token create`, driven by the official Python SDK's Streamable HTTP client and by raw
requests for what a client must never get (no token, a read-only token's halt, a foreign Host,
a body too big)."""

import collections
import contextlib
import json
import random
import re
import signal
import socket
import ssl
import subprocess
import time

import anyio
import httpx2
import pytest
from conftest import BIN, FAKE, record, server_env, wait_until
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

pytestmark = pytest.mark.anyio


def token(home, name, *flags):
    out = subprocess.run(
        [BIN, "--home", str(home), "token", "create", name, *flags],
        capture_output=True, text=True, env=server_env(home), check=True,
    )
    return out.stdout.strip()


class Served(str):
    """The server's URL; `.proc` is its process, `.log` its stderr so far."""

    def log(self):
        return self.stderr.read_text()


@pytest.fixture
def server(home, tmp_path):
    """A fresh `agentctl mcp --http` on a port of its own; its URL once it serves."""
    home.mkdir(mode=0o700, exist_ok=True)
    stderr = tmp_path / "server.err"
    with open(stderr, "w") as err:
        proc = subprocess.Popen(
            [BIN, "--home", str(home), "mcp", "--http", "127.0.0.1:0", "--allow-run"],
            stderr=err, text=True, env=server_env(home),
        )
    end = time.monotonic() + 30
    while not (match := re.search(r"serving MCP at (http://\S+)", stderr.read_text())):
        assert proc.poll() is None and time.monotonic() < end, f"the server did not start: {stderr.read_text()}"
        time.sleep(0.01)
    url = Served(match.group(1))
    url.proc, url.stderr = proc, stderr
    yield url
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, url.log()


def client(url, secret, mode="legacy"):
    headers = {"Authorization": f"Bearer {secret}"}
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(headers=headers)), mode=mode)


def post(url, body, via=httpx2, **headers):
    headers.setdefault("content-type", "application/json")
    headers.setdefault("accept", "application/json, text/event-stream")
    return via.post(url, content=body if isinstance(body, (bytes, str)) else json.dumps(body), headers=headers)


def wait_under_way(url, headers, call=None):
    """A `wait_for_event` (or the request `call`) sent by hand on a socket of its own, once the
    server has begun to answer it (its stream's headers came): the socket."""
    call = call or json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                               "params": {"name": "wait_for_event", "arguments": {"timeout_secs": 30}}}).encode()
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    sock = socket.create_connection(("127.0.0.1", port))
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock.sendall(
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{head}Content-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(call)}\r\n\r\n".encode() + call
    )
    sock.settimeout(30)
    assert sock.recv(4096).startswith(b"HTTP/1.1 200"), "the wait is under way"
    return sock


LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def session(url, **auth):
    """A session begun by hand (initialize, then initialized): the headers its requests carry."""
    return session_via(httpx2, url, **auth)


def session_via(via, url, **auth):
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = dict(auth, **{"mcp-session-id": post(url, init, via=via, **auth).headers["mcp-session-id"]})
    post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, via=via, **headers)
    return headers


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_token_holder_runs_awaits_and_halts_tasks(home, server, mode):
    async with client(server, token(home, "lead"), mode=mode) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"ask", "run", "await", "halt", "list", "logs", "wait_for_event"} <= names
        quick = await c.call_tool("run", {"command": [FAKE, "sleep", "0", "hello over http"]})
        assert not quick.is_error, quick.content[0].text
        assert quick.structured_content["summary"] == "hello over http"
        slow = await c.call_tool("run", {"command": [FAKE, "sleep", "60"], "async": True})
        tok = slow.structured_content["token"]
        waited = await c.call_tool("await", {"token": tok, "timeout_secs": 0.2})
        assert waited.structured_content["status"] == "running"
        halted = await c.call_tool("halt", {"token": tok, "grace_secs": 0.1})
        assert not halted.is_error, halted.content[0].text
        assert record(home, tok)["ended"]["outcome"]["status"] == "cancelled"
        listed = await c.call_tool("list", {})
        assert {t["token"] for t in listed.structured_content["tasks"]} >= {tok}


async def test_each_token_is_a_client_of_its_own(home, server):
    async with client(server, token(home, "alice")) as a, client(server, token(home, "bob")) as b:
        r = await a.call_tool("run", {"command": [FAKE, "sleep", "0", "for alice"], "async": True})
        tok = r.structured_content["token"]
        assert record(home, tok)["session"] == "alice"
        got = await a.call_tool("wait_for_event", {"timeout_secs": 30})
        assert got.structured_content["type"] == "task_finished", got.content[0].text
        assert got.structured_content["token"] == tok
        other = await b.call_tool("wait_for_event", {"timeout_secs": 0.3})
        assert other.structured_content["type"] == "timeout", other.content[0].text


def test_a_session_ends_with_delete(home, server):
    headers = session(server, authorization=f"Bearer {token(home, 'lead')}")
    assert post(server, LIST, **headers).status_code == 200
    ended = httpx2.delete(server, headers=headers)
    assert ended.status_code == 204, ended.text
    gone = post(server, LIST, **headers)
    assert gone.status_code == 404 and "error" in gone.json(), gone.text


def sse_ids(text):
    """The ids of the events in an event stream's text, in order."""
    return [line[4:] for line in text.splitlines() if line.startswith("id: ")]


def test_a_resumed_stream_goes_on_after_the_last_event_the_client_had(home, server):
    """A client whose stream broke while its call was under way asks for what came after the
    last event it had (`Last-Event-ID`): it gets the events after that one, not that one again."""
    auth = {"authorization": f"Bearer {token(home, 'lead')}"}
    headers = session(server, **auth)
    started = post(server, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "run", "arguments": {"command": [FAKE, "sleep", "60"], "async": True}}}, **headers)
    tok = json.loads(started.text[started.text.index("data: {") + 6:].split("\n", 1)[0])["result"]["structuredContent"]["token"]
    try:
        # An await that reports progress; its stream breaks after the first progress event.
        call = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "await", "arguments": {"token": tok, "timeout_secs": 20}, "_meta": {"progressToken": 1}}}).encode()
        sock = wait_under_way(server, headers, call)
        got = b""
        while len(sse_ids(got.decode())) < 2:
            got += sock.recv(65536)
        # The client gives up on the call (as the Python SDK does at its read timeout), then
        # resumes the stream from the last event it had.
        post(server, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}, **headers)
        sock.close()
        had = sse_ids(got.decode())[1]
        resumed = []
        with contextlib.suppress(httpx2.ReadTimeout), httpx2.stream(
            "GET", server, headers=dict(headers, **{"last-event-id": had, "accept": "text/event-stream"}),
            timeout=httpx2.Timeout(30, read=3),
        ) as again:
            assert again.status_code == 200
            for line in again.iter_lines():
                if line.startswith("id: "):
                    resumed.append(line[4:])
        assert had not in resumed, (had, resumed)
    finally:
        subprocess.run([BIN, "--home", str(home), "halt", tok, "--grace", "0.1s"], env=server_env(home), capture_output=True)


async def test_without_a_valid_token_nothing_is_served(home, server):
    revoked = token(home, "gone")
    subprocess.run([BIN, "--home", str(home), "token", "revoke", "gone"], check=True, env=server_env(home))
    expired = token(home, "short", "--expires", "1ms")
    cases = {
        "none": {},
        "wrong": {"authorization": "Bearer agentctl_" + "0" * 64},
        "revoked": {"authorization": f"Bearer {revoked}"},
        "expired": {"authorization": f"Bearer {expired}"},
        "not bearer": {"authorization": f"Basic {revoked}"},
    }
    for case, headers in cases.items():
        r = post(server, LIST, **headers)
        assert r.status_code == 401, (case, r.text)
        challenge = r.headers["www-authenticate"]
        assert challenge.startswith('Bearer resource_metadata="http://127.0.0.1:'), (case, challenge)
        meta_url = re.search(r'resource_metadata="([^"]+)"', challenge).group(1)
        meta = httpx2.get(meta_url)
        assert meta.status_code == 200 and meta.json()["resource"] == server, meta.text
    assert "revoked" in post(server, LIST, authorization=f"Bearer {revoked}").json()["error"]


async def test_a_read_only_token_reads_and_waits_but_stops_nothing(home, server):
    async with client(server, token(home, "lead")) as lead:
        r = await lead.call_tool("run", {"command": [FAKE, "sleep", "60"], "async": True})
        tok = r.structured_content["token"]
        viewer = token(home, "viewer", "--read-only")
        async with client(server, viewer) as v:
            listed = await v.call_tool("list", {})
            assert tok in {t["token"] for t in listed.structured_content["tasks"]}
            waited = await v.call_tool("await", {"token": tok, "timeout_secs": 0.1})
            assert waited.structured_content["status"] == "running"
        for tool, args in [("halt", {"token": tok}), ("run", {"command": ["true"]}), ("send", {"token": tok, "message": "x"})]:
            call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": tool, "arguments": args}}
            refused = post(server, call, authorization=f"Bearer {viewer}")
            assert refused.status_code == 403, (tool, refused.text)
            assert "read-only" in refused.json()["error"]["message"] and refused.json()["id"] == 7
        assert record(home, tok)["ended"] is None, "a read-only token's halt stopped the task"
        await lead.call_tool("halt", {"token": tok, "grace_secs": 0.1})


async def test_foreign_hosts_and_huge_bodies_are_refused(home, server):
    secret = token(home, "lead")
    auth = f"Bearer {secret}"
    assert post(server, LIST, authorization=auth, host="evil.example").status_code == 403
    assert post(server, LIST, authorization=auth, origin="http://evil.example").status_code == 403
    assert post(server, LIST, host="evil.example").status_code == 403, "refused before the token is looked at"
    huge = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"' + b"x" * (20 << 20) + b'"}}'
    with contextlib.suppress(httpx2.HTTPError):
        r = post(server, huge, authorization=auth)
        assert r.status_code == 413, r.text
    # Still serving.
    async with client(server, secret) as c:
        assert (await c.list_tools()).tools


def test_malformed_and_mutated_bodies_each_get_a_json_rpc_error(home, server):
    auth = {"authorization": f"Bearer {token(home, 'fuzz')}"}
    in_session = session(server, **auth)
    good = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "list", "arguments": {"limit": 3}}}).encode()
    rng = random.Random(7)
    seen = collections.Counter()
    via = httpx2.Client()
    for _ in range(1000):
        body = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(body))
            roll = rng.random()
            if roll < 0.4:
                body[at] = rng.randrange(256)
            elif roll < 0.7:
                del body[at]
            else:
                body.insert(at, rng.choice(b'{}[]",:0123456789aeflnrstu\\'))
        headers = in_session if rng.random() < 0.8 else auth
        r = post(server, bytes(body), via=via, **headers)
        seen[r.status_code] += 1
        assert r.status_code < 500, (bytes(body), r.text)
        if r.status_code == 202:
            continue  # it became a notification: those get no answer
        assert r.headers["content-type"].startswith(("application/json", "text/event-stream")), (bytes(body), r.text)
        assert '"jsonrpc":"2.0"' in r.text.replace(" ", ""), (bytes(body), r.text)
    assert seen[400] > 500, seen
    assert post(server, LIST, **in_session).status_code == 200, "still serving"


async def test_a_stop_answers_the_calls_under_way_and_leaves_tasks_running(home, server):
    async with client(server, token(home, "lead")) as c:
        r = await c.call_tool("run", {"command": [FAKE, "sleep", "60"], "async": True})
        tok = r.structured_content["token"]
        answers, waiting = {}, set()

        async def call(name, args):
            async def on_progress(value, total, message):
                waiting.add(name)

            answers[name] = await c.call_tool(name, args, progress_callback=on_progress)

        async with anyio.create_task_group() as calls:
            calls.start_soon(call, "await", {"token": tok, "timeout_secs": 50})
            calls.start_soon(call, "wait_for_event", {"timeout_secs": 50})
            # The server reports progress on each call it is serving (every few seconds).
            await wait_until("both calls to be served", lambda: len(waiting) == 2, limit=30)
            server.proc.send_signal(signal.SIGTERM)
        for name, answer in answers.items():
            assert answer.is_error and "server is stopping" in answer.content[0].text, (name, answer.content[0].text)
    assert server.proc.wait(timeout=60) == 0, server.log()
    assert record(home, tok)["ended"] is None, "the task ended with the server"
    subprocess.run([BIN, "--home", str(home), "halt", tok, "--grace", "0.1s"], env=server_env(home), capture_output=True)


async def test_many_clients_each_get_their_own_tasks_end(home, server):
    """40 clients of 8 tokens, each awaiting a task of its own at once: every await comes back
    with its own task, completed, and a client that calls meanwhile is answered."""
    secrets = [token(home, f"lead{i}") for i in range(8)]
    async with client(server, secrets[0]) as starter:
        tokens = []
        for i in range(40):
            r = await starter.call_tool("run", {"command": [FAKE, "sleep", "2", f"answer {i}"], "async": True})
            tokens.append(r.structured_content["token"])
        got = {}

        async def awaiting(i):
            async with client(server, secrets[i % 8]) as c:
                got[i] = (await c.call_tool("await", {"token": tokens[i], "timeout_secs": 50})).structured_content

        async with anyio.create_task_group() as clients:
            for i in range(40):
                clients.start_soon(awaiting, i)
            listed = await starter.call_tool("list", {"limit": 5})
            assert not listed.is_error, listed.content[0].text
    assert sorted(got) == list(range(40))
    for i, answer in got.items():
        assert (answer["token"], answer["status"], answer["summary"]) == (tokens[i], "completed", f"answer {i}"), answer


def test_slow_clients_hold_up_nobody(home, server):
    """100 connections that send their headers a byte at a time beside a client that calls:
    its calls are answered as they come (the bound is a hang guard, not a timing claim)."""
    auth = f"Bearer {token(home, 'lead')}"
    in_session = session(server, authorization=auth)
    port = int(server.rsplit(":", 1)[1].split("/")[0])
    slow = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
    head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: " + auth.encode()
    try:
        with httpx2.Client() as via:
            for i in range(20):
                for s in slow:
                    s.sendall(head[i:i + 1])
                t0 = time.monotonic()
                r = post(server, LIST, via=via, **in_session)
                assert r.status_code == 200 and time.monotonic() - t0 < 10, r.text
    finally:
        for s in slow:
            s.close()


def test_over_tls_with_a_certificate_of_its_own(home, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    home.mkdir(mode=0o700, exist_ok=True)
    stderr = tmp_path / "tls.err"
    with open(stderr, "w") as err:
        proc = subprocess.Popen(
            [BIN, "--home", str(home), "mcp", "--http", "127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(key)],
            stderr=err, env=server_env(home),
        )
    try:
        end = time.monotonic() + 30
        while not (match := re.search(r"serving MCP at (https://\S+)", stderr.read_text())):
            assert proc.poll() is None and time.monotonic() < end, stderr.read_text()
            time.sleep(0.01)
        url = match.group(1)
        with httpx2.Client(verify=ssl.create_default_context(cafile=str(cert))) as via:
            r = post(url, LIST, via=via)
            assert r.status_code == 401 and 'resource_metadata="https://' in r.headers["www-authenticate"]
            auth = {"authorization": f"Bearer {token(home, 'lead')}"}
            assert post(url, LIST, via=via, **session_via(via, url, **auth)).status_code == 200
        with pytest.raises(httpx2.HTTPError):
            httpx2.post(url.replace("https://", "http://"), content=json.dumps(LIST), timeout=5)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, stderr.read_text()


def test_tls_files_that_cannot_serve_are_refused_at_start(home, tmp_path):
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    out = subprocess.run(
        [BIN, "--home", str(home), "mcp", "--http", "127.0.0.1:0", "--tls-cert", str(junk), "--tls-key", str(junk)],
        capture_output=True, text=True, env=server_env(home), timeout=30,
    )
    assert out.returncode == 2 and "junk.pem" in out.stderr, out.stderr
    out = subprocess.run(
        [BIN, "--home", str(home), "mcp", "--http", "0.0.0.0:0"], capture_output=True, text=True, env=server_env(home), timeout=30,
    )
    assert out.returncode == 2 and "--tls-cert" in out.stderr and "--insecure-http" in out.stderr, out.stderr


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_an_event_whose_answer_was_lost_goes_to_the_next_wait(home, server, protocol):
    """A client that goes away while its wait is under way loses nothing: the event that wait
    took is put back when its answer cannot be sent, and the token's next wait gets it."""
    secret = token(home, "lead")
    if protocol == "2025-11-25":
        gone = wait_under_way(server, session(server, authorization=f"Bearer {secret}"))
    else:
        call, headers = stateless_request(secret, "tools/call", {"name": "wait_for_event", "arguments": {"timeout_secs": 30}})
        gone = wait_under_way(server, headers, call)
    gone.close()
    subprocess.run([BIN, "--home", str(home), "notify", "--session", "lead", "are you there?"],
                   check=True, env=server_env(home), capture_output=True)
    async with client(server, secret) as c:
        got = await c.call_tool("wait_for_event", {"timeout_secs": 30})
        assert got.structured_content["type"] == "message", got.content[0].text
        assert got.structured_content["text"] == "are you there?"
        again = await c.call_tool("wait_for_event", {"timeout_secs": 0.3})
        assert again.structured_content["type"] == "timeout", "delivered once, not twice"


def wait_until_sync(what, cond, limit=30.0):
    """Poll `cond` until it holds; the limit is a hang guard."""
    end = time.monotonic() + limit
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.01)


def stateless_request(secret, method, params, id=1):
    """A request of protocol 2026-07-28 (no session; the metadata in each request): its body
    and the headers it needs."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    headers = {"authorization": f"Bearer {secret}", "mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if "name" in params or "taskId" in params:
        headers["mcp-name"] = params.get("name") or params["taskId"]
    body = json.dumps({"jsonrpc": "2.0", "id": id, "method": method, "params": dict(params, _meta=meta)})
    return body.encode(), headers


def stateless(url, secret, method, params, id=1):
    """One request of protocol 2026-07-28, by hand: its answer."""
    body, headers = stateless_request(secret, method, params, id)
    r = post(url, body, **headers)
    data = [line[6:] for line in r.text.splitlines() if line.startswith("data: {")]
    return json.loads(data[-1] if data else r.text)


async def test_a_quiet_wait_begins_its_stream_and_keeps_it_alive(home, server):
    """A wait of protocol 2026-07-28 whose client sent no progress token has nothing to say
    before its result: the server begins the event stream anyway and comments on it while it
    waits, so that no proxy takes the connection for idle; the result then comes on it."""
    secret = token(home, "lead")
    body, headers = stateless_request(secret, "tools/call", {"name": "wait_for_event", "arguments": {"timeout_secs": 8}})
    port = int(server.rsplit(":", 1)[1].split("/")[0])
    head = "".join(f"{k}: {v}\r\n" for k, v in dict(headers, **{"content-type": "application/json",
                   "accept": "application/json, text/event-stream"}).items())
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{head}Connection: close\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        sock.settimeout(60)
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
    assert got.startswith(b"HTTP/1.1 200") and b"text/event-stream" in got, got
    assert b"\n:\n" in got and got.index(b"\n:\n") < got.index(b"data: {"), got
    answer = json.loads(got[got.index(b"data: {") + 6:].split(b"\n", 1)[0])
    assert answer["result"]["structuredContent"]["type"] == "timeout", answer
    # The SDK's client reads such a stream as any other.
    async with client(server, secret, mode="2026-07-28") as c:
        r = await c.call_tool("wait_for_event", {"timeout_secs": 2})
        assert r.structured_content["type"] == "timeout", r.content[0].text


def test_a_killed_server_loses_nothing_its_successor_does_not_give_back(home, server, tmp_path):
    secret = token(home, "lead")
    created = stateless(server, secret, "tools/call", {"name": "run", "arguments": {"command": [FAKE, "sleep", "2", "finished while down"]}})
    assert created["result"]["resultType"] == "task", created
    # A wait under way when the server dies.
    headers = session(server, authorization=f"Bearer {secret}")
    waiting = wait_under_way(server, headers)
    server.proc.kill()
    server.proc.wait()
    waiting.close()
    # Its task ends while no server runs; a message comes too.
    tok = created["result"]["statusMessage"].split()[2]
    wait_until_sync("the task to end", lambda: record(home, tok)["ended"] is not None)
    subprocess.run([BIN, "--home", str(home), "notify", "--session", "lead", "while you were down"],
                   check=True, env=server_env(home), capture_output=True)
    with open(tmp_path / "again.err", "w") as err:
        again = subprocess.Popen([BIN, "--home", str(home), "mcp", "--http", "127.0.0.1:0"], stderr=err, env=server_env(home))
    try:
        end = time.monotonic() + 30
        while not (m := re.search(r"serving MCP at (http://\S+)", (tmp_path / "again.err").read_text())):
            assert time.monotonic() < end and again.poll() is None
            time.sleep(0.01)
        url = m.group(1)
        done = stateless(url, secret, "tasks/get", {"taskId": created["result"]["taskId"]})
        assert done["result"]["status"] == "completed", done
        assert "finished while down" in done["result"]["result"]["content"][0]["text"], done
        got = set()
        for _ in range(2):
            e = stateless(url, secret, "tools/call", {"name": "wait_for_event", "arguments": {"timeout_secs": 10}})
            got.add(e["result"]["structuredContent"]["type"])
        assert got == {"task_finished", "message"}, got
        once = stateless(url, secret, "tools/call", {"name": "wait_for_event", "arguments": {"timeout_secs": 0.3}})
        assert once["result"]["structuredContent"]["type"] == "timeout", once
    finally:
        again.send_signal(signal.SIGTERM)
        assert again.wait(timeout=60) == 0
