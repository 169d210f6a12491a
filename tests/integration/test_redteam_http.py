"""Red-team cases for syncd's HTTP side (docs/security.md, "Cross-site access"): DNS rebinding
through Host, cross-site state changes without a preflight, forged Origin values, request
smuggling, malformed credit, unbounded event replies and uncounted 405s. Each case sends the
hostile request, expects the documented refusal and counter, then checks /healthz still answers."""
import asyncio
import json
import re
import socket
import unittest

import websockets

from harness import Syncd, frame_message, marker_pixels, raw_http, upgrade_request

LOOPBACK = b"Host: 127.0.0.1\r\n"


def status_of(reply):
    return int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1 ") else 0


def headers_of(reply):
    head = reply.partition(b"\r\n\r\n")[0].decode("latin-1")
    return {k.strip().lower(): v.strip() for k, _, v in
            (line.partition(":") for line in head.split("\r\n")[1:])}


def metric(text, name, labels):
    m = re.search(r"^" + re.escape(name + "{" + labels + "}") + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


async def open_source(url, name, width=2, height=2):
    """A stream of `name` on a fresh control WebSocket, and a one-use ticket for it."""
    ws = await websockets.connect(url, max_size=None)
    await ws.send(json.dumps({"type": "hello", "protocol": 1}))
    await ws.recv()
    await ws.send(json.dumps({"type": "stream.open", "name": name, "width": width,
                              "height": height, "format": "rgba8", "fps": 1000}))
    sid = json.loads(await ws.recv())["stream"]
    await ws.send(json.dumps({"type": "ticket.create", "stream": sid, "uses": 1}))
    ticket = json.loads(await ws.recv())["ticket"]
    return ws, sid, ticket


class RedTeamHttp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ctx = Syncd("--allow-host", "sync.lan", "--allow-origin", "https://noisedeck.app")
        cls.syncd = cls.ctx.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.ctx.__exit__(None, None, None)

    def server(self):
        return self.syncd.stats()["server"]

    def assertStillServing(self):
        self.assertEqual(self.syncd.get("/healthz"), (200, "ok"))

    def assertRefused(self, request, status, counter, times=1):
        """Sends `request` raw; expects `status`, `counter` up by `times` and a closed socket."""
        before = self.server()[counter]
        reply = raw_http(self.syncd.port, request)
        self.assertEqual(status_of(reply), status, reply[:200])
        self.assertIn(b"Connection: close", reply)
        self.assertEqual(self.server()[counter], before + times, counter)
        self.assertStillServing()
        return reply

    # --- Item 7: Host (DNS rebinding) ---------------------------------------------------------

    def test_rebinding_host_is_421_on_every_endpoint(self):
        before = metric(self.syncd.get("/metrics")[1], "syncd_http_errors_total", 'status="421"')
        for target in [b"/stats", b"/metrics", b"/healthz", b"/events/frames?since=0", b"/",
                       b"/streams/x?ticket=00", b"/nope"]:
            with self.subTest(target=target):
                self.assertRefused(b"GET " + target + b" HTTP/1.1\r\nHost: evil.example:54997\r\n\r\n",
                                   421, "http_host_refused")
        for host in [b"evil.example", b"localhost.evil.example", b"127.0.0.1.nip.io:1",
                     b"127.0.0.01", b"0.0.0.0", b"[::2]:54997"]:
            with self.subTest(host=host):
                self.assertRefused(b"GET /stats HTTP/1.1\r\nHost: " + host + b"\r\n\r\n", 421,
                                   "http_host_refused")
        after = metric(self.syncd.get("/metrics")[1], "syncd_http_errors_total", 'status="421"')
        self.assertEqual(after, before + 13)

    def test_rebinding_host_cannot_upgrade(self):
        request = upgrade_request().replace(LOOPBACK, b"Host: evil.example:54997\r\n")
        self.assertRefused(request, 421, "http_host_refused")

    def test_rebinding_host_cannot_spend_a_ticket(self):
        async def scenario():
            ws, _, ticket = await open_source(self.syncd.url, "rebind")
            target = f"/streams/rebind?ticket={ticket}".encode()
            self.assertRefused(b"GET " + target + b" HTTP/1.1\r\nHost: evil.example\r\n\r\n", 421,
                               "http_host_refused")
            # The ticket was not spent: the real receiver still gets in.
            with socket.create_connection(("127.0.0.1", self.syncd.port), timeout=5) as s:
                s.sendall(b"GET " + target + b" HTTP/1.1\r\n" + LOOPBACK + b"\r\n")
                self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200"))
            await ws.close()

        asyncio.run(scenario())

    def test_missing_repeated_or_malformed_host_is_400(self):
        for head in [b"GET /stats HTTP/1.1\r\n\r\n",
                     b"GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n",
                     b"GET /stats HTTP/1.1\r\nHost: 127.0.0.1:80:80\r\n\r\n",
                     b"GET /stats HTTP/1.1\r\nHost: evil@127.0.0.1\r\n\r\n",
                     b"GET /stats HTTP/1.1\r\nHost: [::1]evil.example\r\n\r\n",
                     b"GET /stats HTTP/1.1\r\nHost: \r\n\r\n"]:
            with self.subTest(head=head):
                self.assertRefused(head, 400, "http_host_invalid")

    def test_loopback_bound_and_allowed_hosts_are_served(self):
        for host in [b"127.0.0.1", b"127.0.0.1:54997", b"localhost", b"LOCALHOST:1", b"[::1]",
                     b"[::1]:54997", b"127.9.8.7", b"sync.lan", b"Sync.LAN:54997"]:
            with self.subTest(host=host):
                reply = raw_http(self.syncd.port, b"GET /healthz HTTP/1.1\r\nHost: " + host +
                                 b"\r\n\r\n")
                self.assertEqual(status_of(reply), 200, reply)
        # HTTP/1.0 may omit Host (RFC 9112 section 3.2); browsers never do.
        self.assertEqual(status_of(raw_http(self.syncd.port, b"GET /healthz HTTP/1.0\r\n\r\n")),
                         200)

    # --- Item 8: cross-site state changes and Origin ------------------------------------------

    def credit_request(self, *headers):
        return (b"POST /streams/x/credit?receiver=999&frames=1 HTTP/1.1\r\n" + LOOPBACK +
                b"Content-Length: 0\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n")

    def test_simple_cross_site_credit_post_is_403(self):
        # What a page on another site can send without a preflight (a CORS "simple" request).
        self.assertRefused(self.credit_request(b"Origin: https://evil.example",
                                               b"Content-Type: text/plain"),
                           403, "origin_refused")
        self.assertRefused(self.credit_request(b"Origin: null", b"Content-Type: text/plain"), 403,
                           "origin_refused")
        self.assertRefused(self.credit_request(b"Content-Type: text/plain"), 403,
                           "origin_missing_refused")
        self.assertRefused(self.credit_request(), 403, "origin_missing_refused")
        metrics = self.syncd.get("/metrics")[1]
        self.assertGreaterEqual(metric(metrics, "syncd_http_refused_total",
                                       'reason="origin_missing"'), 2)

    def test_allowed_origins_and_native_clients_reach_credit(self):
        # 404 (unknown receiver) shows the request got past the cross-site check.
        for headers in [(b"Origin: http://localhost:8080",), (b"Origin: http://127.0.0.1",),
                        (b"Origin: https://noisedeck.app",), (b"Sync-Client: 1",)]:
            with self.subTest(headers=headers):
                reply = raw_http(self.syncd.port, self.credit_request(*headers))
                self.assertEqual(status_of(reply), 404, reply)

    def test_credit_post_from_allowed_origin_grants(self):
        async def scenario():
            ws, sid, ticket = await open_source(self.syncd.url, "granted")
            with socket.create_connection(("127.0.0.1", self.syncd.port), timeout=5) as r:
                r.sendall(f"GET /streams/granted?ticket={ticket}&credit=1 HTTP/1.1\r\n"
                          "Host: 127.0.0.1\r\n\r\n".encode())
                head = b""
                while b"\r\n\r\n" not in head:
                    head += r.recv(4096)
                receiver = headers_of(head)["x-sync-receiver"].encode()
                post = (b"POST /streams/granted/credit?receiver=" + receiver + b"&frames=1 "
                        b"HTTP/1.1\r\n" + LOOPBACK + b"Content-Length: 0\r\n")
                self.assertEqual(status_of(raw_http(self.syncd.port, post +
                                 b"Origin: https://evil.example\r\nContent-Type: text/plain\r\n\r\n")),
                                 403)
                self.assertEqual(status_of(raw_http(self.syncd.port, post +
                                 b"Origin: http://localhost:5173\r\n\r\n")), 204)
                self.assertEqual(status_of(raw_http(self.syncd.port, post +
                                 b"Sync-Client: 1\r\n\r\n")), 204)
            await ws.close()

        asyncio.run(scenario())

    def test_preflight_from_foreign_origin_gets_no_cors_approval(self):
        for origin in [b"https://evil.example", b"null"]:
            with self.subTest(origin=origin):
                reply = raw_http(self.syncd.port,
                                 b"OPTIONS /streams/x/credit?receiver=1 HTTP/1.1\r\n" + LOOPBACK +
                                 b"Origin: " + origin + b"\r\nAccess-Control-Request-Method: POST"
                                 b"\r\nAccess-Control-Request-Headers: sync-client\r\n\r\n")
                self.assertGreaterEqual(status_of(reply), 400, reply)
                self.assertFalse([h for h in headers_of(reply) if h.startswith("access-control-allow")],
                                 reply)
        self.assertStillServing()

    def test_forged_origins_cannot_upgrade(self):
        for origin in [b"http://[::1]evil.example", b"http://127.0.0.1:80@evil.example",
                       b"http://localhost:80:80", b"http://localhost:abc", b"null",
                       b"http://localhost:65536", b"HTTP://localhost", b"http://localhost/",
                       b"http://user@localhost", b"http://[::1", b"https://noisedeck.app:443"]:
            with self.subTest(origin=origin):
                self.assertRefused(upgrade_request(origin=origin), 403, "origin_refused")

    # --- Smuggling -----------------------------------------------------------------------------

    def test_smuggling_heads_are_400_and_closed(self):
        cases = {
            "content-length and transfer-encoding":
                b"POST /streams/x/credit HTTP/1.1\r\n" + LOOPBACK +
                b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "duplicate content-length":
                b"POST /streams/x/credit HTTP/1.1\r\n" + LOOPBACK +
                b"Content-Length: 0\r\nContent-Length: 44\r\n\r\n",
            "body on GET":
                b"GET /stats HTTP/1.1\r\n" + LOOPBACK + b"Content-Length: 5\r\n\r\nhello",
            "body announced on GET, never sent":
                b"GET /stats HTTP/1.1\r\n" + LOOPBACK + b"Content-Length: 5\r\n\r\n",
            "chunked GET":
                b"GET /stats HTTP/1.1\r\n" + LOOPBACK + b"Transfer-Encoding: chunked\r\n\r\n"
                b"0\r\n\r\n",
            "obs-fold": b"GET /stats HTTP/1.1\r\n" + LOOPBACK + b"X-A: 1\r\n evil: 2\r\n\r\n",
            "bare CR": b"GET /stats HTTP/1.1\r\n" + LOOPBACK + b"X-A: 1\rX-B: 2\r\n\r\n",
            "space in a header name": b"GET /stats HTTP/1.1\r\n" + LOOPBACK + b"X A: 1\r\n\r\n",
            "space before the colon": b"GET /stats HTTP/1.1\r\nHost : evil.example\r\n" +
                                      LOOPBACK + b"\r\n",
        }
        for name, request in cases.items():
            with self.subTest(case=name):
                self.assertRefused(request, 400, "http_framing_refused")
        self.assertGreaterEqual(metric(self.syncd.get("/metrics")[1], "syncd_http_refused_total",
                                       'reason="framing"'), len(cases))

    def test_smuggled_second_request_is_not_answered(self):
        # A pipelined request hidden behind a body syncd refuses must never be served.
        reply = raw_http(self.syncd.port,
                         b"GET /healthz HTTP/1.1\r\n" + LOOPBACK + b"Content-Length: 40\r\n\r\n"
                         b"GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        self.assertEqual(reply.count(b"HTTP/1.1 "), 1, reply)
        self.assertEqual(status_of(reply), 400)
        self.assertStillServing()

    # --- Item 12: 405 in /metrics --------------------------------------------------------------

    def test_405_is_counted_in_metrics(self):
        before = metric(self.syncd.get("/metrics")[1], "syncd_http_errors_total", 'status="405"')
        self.assertIsNotNone(before, "syncd_http_errors_total{status=\"405\"} is not emitted")
        reply = self.assertRefused(b"POST /stats HTTP/1.1\r\n" + LOOPBACK +
                                   b"Content-Length: 0\r\n\r\n", 405, "http_method_not_allowed")
        self.assertEqual(headers_of(reply)["allow"], "GET")
        self.assertRefused(b"DELETE /streams/x/credit HTTP/1.1\r\n" + LOOPBACK + b"\r\n", 405,
                           "http_method_not_allowed")
        after = metric(self.syncd.get("/metrics")[1], "syncd_http_errors_total", 'status="405"')
        self.assertEqual(after, before + 2)

    # --- Item 14: malformed credit does not spend the ticket -----------------------------------

    def test_malformed_credit_is_400_and_keeps_the_ticket(self):
        async def scenario():
            ws, _, ticket = await open_source(self.syncd.url, "credit14")
            for credit in [b"abc", b"3x", b"-1", b"%31", b"1.5", b"99999999999999999999999"]:
                with self.subTest(credit=credit):
                    self.assertRefused(b"GET /streams/credit14?ticket=" + ticket.encode() +
                                       b"&credit=" + credit + b" HTTP/1.1\r\n" + LOOPBACK +
                                       b"\r\n", 400, "http_bad_requests")
            # Empty credit is the default (2). The ticket has one use: it was not spent above.
            with socket.create_connection(("127.0.0.1", self.syncd.port), timeout=5) as s:
                s.sendall(b"GET /streams/credit14?ticket=" + ticket.encode() +
                          b"&credit= HTTP/1.1\r\n" + LOOPBACK + b"\r\n")
                self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200"))
            await ws.close()

        asyncio.run(scenario())

    # --- Item 6: /events/frames replies are bounded ---------------------------------------------

    def test_frame_events_reply_is_paged(self):
        page = 4096

        async def produce(count):
            ws, sid, _ = await open_source(self.syncd.url, "events", 2, 2)
            for seq in range(count):
                await ws.send(frame_message(sid, seq, marker_pixels(16, seq)))
                if seq % 500 == 499:  # keep the frames in flight within the pool
                    await ws.send(json.dumps({"type": "ping", "id": seq}))
                    while json.loads(await ws.recv()).get("type") != "pong":
                        pass
            await ws.send(json.dumps({"type": "ping", "id": -1}))
            while json.loads(await ws.recv()).get("type") != "pong":
                pass
            await ws.close()

        asyncio.run(produce(page + 300))
        self.assertGreater(self.syncd.stream_stats("events")["frames_accepted"], page)
        head = b"GET /events/frames?since=0 HTTP/1.1\r\n" + LOOPBACK + b"\r\n"
        reply = raw_http(self.syncd.port, head)
        self.assertEqual(status_of(reply), 200)
        headers = headers_of(reply)
        self.assertEqual(headers["content-type"], "text/csv")
        body = reply.partition(b"\r\n\r\n")[2].decode()
        lines = body.strip().split("\n")
        self.assertEqual(lines[0],
                         "index,stream,sequence,receive_start_ns,accept_ns,publish_done_ns")
        self.assertEqual(len(lines) - 1, page)
        # Six numbers of at most 20 digits a record: the reply is bounded whatever was logged.
        self.assertLess(len(body), 100 + page * (6 * 20 + 6))
        first_index = int(lines[1].split(",")[0])
        self.assertEqual(int(headers["x-events-next"]), first_index + page)
        self.assertEqual(int(headers["x-events-lost"]), first_index)
        rest = raw_http(self.syncd.port,
                        head.replace(b"since=0", b"since=" + headers["x-events-next"].encode()))
        rest_lines = rest.partition(b"\r\n\r\n")[2].decode().strip().split("\n")
        self.assertGreaterEqual(len(rest_lines) - 1, 300)
        self.assertEqual(int(rest_lines[1].split(",")[0]), first_index + page)
        self.assertStillServing()


if __name__ == "__main__":
    unittest.main()
