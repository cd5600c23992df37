"""Figure 16: MCP over HTTP on loopback (`agentctl mcp --http`). First an `await` of an ended
task, as the Python SDK's Streamable HTTP client sees it and as a raw keep-alive connection
sees it. Then the same quick calls from one more client while 200 clients each await a running
task of their own and 100 slow clients send their headers a byte a second (reconnecting when
the server cuts them off), with the server's memory before, under and after that load. Every
one of the 200 awaits must come back with its task's end once the tasks are halted."""

import concurrent.futures
import http.client
import json
import os
import re
import socket
import subprocess
import threading
import time

from common import Agentctl, fmt, row, stats

AWAITING = 200
SLOW = 100
TOKENS = 20
UNDER_LOAD_SECS = 15

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}}


def call(name, arguments, id=1):
    """A `tools/call` of protocol 2026-07-28 (no session: the metadata rides in each request),
    as a body and the headers that go with it."""
    body = json.dumps({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments, "_meta": META}})
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": name}
    return body, headers


def answer(text):
    """The JSON-RPC answer in a response body, plain JSON or an event stream."""
    start = text.find('{"jsonrpc"')
    assert start >= 0, text[:300]
    return json.JSONDecoder().raw_decode(text[start:])[0]


class Server:
    """`agentctl mcp --http 127.0.0.1:0` on `ag`'s home, with `TOKENS` tokens."""

    def __init__(self, ag, tmp):
        self.secrets = [ag.run("token", "create", f"bench{i}").strip() for i in range(TOKENS)]
        self.err = tmp / "http-server.err"
        with open(self.err, "w") as err:
            self.proc = subprocess.Popen(ag.cmd("mcp", "--http", "127.0.0.1:0", "--allow-run"), env=ag.env, stderr=err)
        end = time.monotonic() + 30
        while not (m := re.search(r"serving MCP at http://127\.0\.0\.1:(\d+)/mcp", self.err.read_text())):
            assert self.proc.poll() is None and time.monotonic() < end, self.err.read_text()
            time.sleep(0.01)
        self.port = int(m.group(1))
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def kib(self, field):
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise KeyError(field)

    def cpu_ms(self):
        """The CPU time the server has used, user and system."""
        fields = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.proc.terminate()
        assert self.proc.wait(timeout=60) == 0, self.err.read_text()[-2000:]


class Keep:
    """One keep-alive connection making calls one after another."""

    def __init__(self, server, secret):
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        self.auth = {"authorization": f"Bearer {secret}"}

    def __call__(self, name, arguments):
        body, headers = call(name, arguments)
        t = time.perf_counter()
        try:
            self.conn.request("POST", "/mcp", body, dict(headers, **self.auth))
            r = self.conn.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # The server closes a connection idle for 10 s; a client opens another, as
            # every HTTP client does (counted in the time).
            self.conn.close()
            self.conn.request("POST", "/mcp", body, dict(headers, **self.auth))
            r = self.conn.getresponse()
        text = r.read().decode()
        ms = (time.perf_counter() - t) * 1000
        assert r.status == 200, (r.status, text[:300])
        got = answer(text)["result"]
        assert not got.get("isError"), got
        return ms, got


def sdk_awaits(server, token, n):
    import anyio
    from mcp import Client
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    async def measure():
        headers = {"Authorization": f"Bearer {server.secrets[0]}"}
        async with Client(streamable_http_client(server.url, http_client=create_mcp_http_client(headers=headers))) as c:
            for _ in range(20):
                await c.call_tool("await", {"token": token})
            times = []
            for _ in range(n):
                t = time.perf_counter()
                await c.call_tool("await", {"token": token})
                times.append((time.perf_counter() - t) * 1000)
            return stats(times)

    return anyio.run(measure)


def awaiter(server, secret, token, under_way, results):
    """One client: an `await` of `token` on a connection of its own, until it answers."""
    body, headers = call("await", {"token": token, "timeout_secs": 55})
    head = "".join(f"{k}: {v}\r\n" for k, v in dict(headers, authorization=f"Bearer {secret}").items())
    data = body.encode()
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n{head}Connection: close\r\n"
                  f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        chunks = [s.recv(65536)]
        under_way.release()
        while chunks[-1]:
            chunks.append(s.recv(65536))
    results.append(b"".join(chunks).decode())


def slow_clients(server, stop, counts):
    """`SLOW` connections that send a request's headers one byte a second; one the server
    cuts off is replaced."""
    head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAuthorization: Bearer {server.secrets[1]}\r\n".encode()
    conns = [[socket.create_connection(("127.0.0.1", server.port)), 0] for _ in range(SLOW)]
    while not stop.wait(1.0):
        for c in conns:
            try:
                c[0].sendall(head[c[1] % len(head):][:1])
                c[1] += 1
            except OSError:
                counts["cut"] += 1
                c[0].close()
                c[:] = [socket.create_connection(("127.0.0.1", server.port)), 0]
    for c in conns:
        c[0].close()


def quick_calls(keep, ended, secs):
    """`await` of an ended task and `list`, one after another for `secs`: their times."""
    times = []
    end = time.monotonic() + secs
    while time.monotonic() < end:
        times.append(keep("await", {"token": ended})[0])
        times.append(keep("list", {"limit": 5})[0])
    return times


def fig_http(ag, pq, tmp, n=300):
    ag = Agentctl(tmp, "http-home", binary=ag.binary)
    server = Server(ag, tmp)
    try:
        ended = ag.start("true")
        ag.run("await", ended)
        keep = Keep(server, server.secrets[0])
        for _ in range(20):
            keep("await", {"token": ended})
        raw = stats([keep("await", {"token": ended})[0] for _ in range(n)])
        sdk = sdk_awaits(server, ended, n)
        idle = stats(quick_calls(keep, ended, 3))
        rss_idle = server.kib("VmRSS")

        running = [ag.start("sleep", "600") for _ in range(AWAITING)]
        under_way, results = threading.Semaphore(0), []
        awaiters = [threading.Thread(target=awaiter, args=(server, server.secrets[i % TOKENS], t, under_way, results))
                    for i, t in enumerate(running)]
        for t in awaiters:
            t.start()
        for _ in awaiters:
            assert under_way.acquire(timeout=60), "an await never began to answer"
        stop, counts = threading.Event(), {"cut": 0}
        slow = threading.Thread(target=slow_clients, args=(server, stop, counts))
        slow.start()
        cpu = server.cpu_ms()
        loaded = quick_calls(keep, ended, UNDER_LOAD_SECS)
        cpu = server.cpu_ms() - cpu
        rss_load = server.kib("VmRSS")
        stop.set()
        slow.join()
        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            list(pool.map(lambda t: ag.run("halt", t, "--grace", "0.1s"), running))
        for t in awaiters:
            t.join(timeout=120)
        statuses = [answer(r)["result"]["structuredContent"]["status"] for r in results]
        assert statuses == ["cancelled"] * AWAITING, statuses
        rss_after, hwm = server.kib("VmRSS"), server.kib("VmHWM")
    finally:
        server.stop()
    under = stats(loaded)
    over = sum(1 for x in loaded if x > 100)
    row(
        "16. MCP over HTTP on loopback (await of an ended task; quick calls under load)",
        f"raw keep-alive client {fmt(raw, 'ms', 2)}, p99 {raw['p99']:.2f} ms; "
        f"Python SDK client {fmt(sdk, 'ms', 2)}, p99 {sdk['p99']:.2f} ms; "
        f"with {AWAITING} clients awaiting and {SLOW} slow ones ({counts['cut']} cut off by the header timeout): "
        f"await/list {under['median']:.2f} ms, p99 {under['p99']:.2f} ms, max {under['max']:.1f} ms, "
        f"{over} of {len(loaded)} over 100 ms, every await answered; server CPU {cpu / len(loaded):.2f} ms a call",
        f"the same calls idle: {idle['median']:.2f} ms, p99 {idle['p99']:.2f} ms; server memory "
        f"{rss_idle / 1024:.1f} MiB idle, {rss_load / 1024:.1f} MiB under load, {rss_after / 1024:.1f} MiB after, "
        f"peak (VmHWM) {hwm / 1024:.1f} MiB",
        f"{under['p99'] / idle['p99']:.1f}× idle p99 under load",
        "await ≤ 2 ms median; under load, calls within 100 ms, memory bounded",
    )
