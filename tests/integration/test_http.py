"""HTTP endpoints and the WebSocket handshake of a real syncd, with raw sockets."""
import json
import socket
import time
import unittest

from harness import Syncd, raw_http, upgrade_request


class HttpEndpoints(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.syncd = Syncd("--handshake-timeout-ms", "700", "--max-header-bytes", "2048").__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.syncd.stop()
        cls.syncd.__exit__(None, None, None)

    def test_healthz(self):
        self.assertEqual(self.syncd.get("/healthz"), (200, "ok"))

    def test_stats_is_json(self):
        status, body = self.syncd.get("/stats")
        self.assertEqual(status, 200)
        stats = json.loads(body)
        self.assertIn("streams", stats)
        self.assertGreater(stats["process"]["resident_memory_bytes"], 0)

    def test_loop_iteration_busy_counts_iterations(self):
        # Every request is served in at least one loop iteration of its own, each of which
        # spends some time away from epoll.
        first = self.syncd.stats()["process"]["loop_iteration_busy"]
        time.sleep(0.6)  # a few 250 ms ticks, each an iteration that waited in epoll first
        stats = self.syncd.stats()
        second = stats["process"]["loop_iteration_busy"]
        self.assertGreater(second["count"], first["count"])
        self.assertGreater(second["total_us"], first["total_us"])
        self.assertEqual(sum(second["histogram"]), second["count"])
        # Busy time excludes the epoll wait: a mostly idle syncd is busy a small part of its life.
        self.assertLess(second["total_us"], 0.5 * stats["server"]["uptime_s"] * 1e6)

    def test_metrics_names(self):
        status, body = self.syncd.get("/metrics")
        self.assertEqual(status, 200)
        for name in ["syncd_resident_memory_bytes", "syncd_loop_cpu_seconds_total",
                     "syncd_loop_iteration_busy_seconds",
                     "syncd_frames_offered_total", "syncd_frames_accepted_total",
                     "syncd_frames_dropped_total", "syncd_frames_verified_total",
                     "syncd_frames_verify_failed_total", "syncd_low_rate_seconds_total"]:
            self.assertIn("# TYPE " + name, body)

    def test_unknown_path_404_and_close(self):
        reply = raw_http(self.syncd.port, b"GET /nope HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        self.assertTrue(reply.startswith(b"HTTP/1.1 404"), reply)
        self.assertIn(b"Connection: close", reply)

    def test_malformed_400(self):
        reply = raw_http(self.syncd.port, b"GET / HTTP/1.1\r\nNo colon here\r\n\r\n")
        self.assertTrue(reply.startswith(b"HTTP/1.1 400"), reply)

    def test_oversized_headers_431(self):
        reply = raw_http(self.syncd.port,
                         b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 4000 + b"\r\n\r\n")
        self.assertTrue(reply.startswith(b"HTTP/1.1 431"), reply)
        self.assertGreaterEqual(self.syncd.stats()["server"]["http_headers_too_large"], 1)

    def test_wrong_version_426(self):
        reply = raw_http(self.syncd.port, upgrade_request(version=b"8"))
        self.assertTrue(reply.startswith(b"HTTP/1.1 426"), reply)
        self.assertIn(b"Sec-WebSocket-Version: 13", reply)

    def test_bad_key_400(self):
        reply = raw_http(self.syncd.port, upgrade_request(key=b"short"))
        self.assertTrue(reply.startswith(b"HTTP/1.1 400"), reply)

    def test_accept_key(self):
        with socket.create_connection(("127.0.0.1", self.syncd.port), timeout=5) as s:
            s.sendall(upgrade_request())
            head = s.recv(4096)
        self.assertTrue(head.startswith(b"HTTP/1.1 101"), head)
        self.assertIn(b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", head)

    def test_foreign_origin_403(self):
        reply = raw_http(self.syncd.port, upgrade_request(origin=b"https://evil.example"))
        self.assertTrue(reply.startswith(b"HTTP/1.1 403"), reply)
        reply = raw_http(self.syncd.port, upgrade_request(origin=b"http://127.0.0.1.evil.example"))
        self.assertTrue(reply.startswith(b"HTTP/1.1 403"), reply)

    def test_loopback_origin_accepted(self):
        for origin in [b"http://localhost:8080", b"http://127.0.0.1", b"https://[::1]:3000"]:
            with socket.create_connection(("127.0.0.1", self.syncd.port), timeout=5) as s:
                s.sendall(upgrade_request(origin=origin))
                self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 101"), origin)

    def test_slow_loris_times_out(self):
        with socket.create_connection(("127.0.0.1", self.syncd.port), timeout=5) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            start = time.time()
            data = s.recv(4096)
            self.assertTrue(data.startswith(b"HTTP/1.1 408"), data)
            self.assertLess(time.time() - start, 3.0)

    def test_hundreds_of_idle_connections_do_not_block_new_ones(self):
        idle = [socket.create_connection(("127.0.0.1", self.syncd.port)) for _ in range(300)]
        try:
            self.assertEqual(self.syncd.get("/healthz"), (200, "ok"))
        finally:
            for s in idle:
                s.close()


class AllowedOrigin(unittest.TestCase):
    def test_allow_listed_origin(self):
        with Syncd("--allow-origin", "https://noisedeck.app") as syncd:
            with socket.create_connection(("127.0.0.1", syncd.port), timeout=5) as s:
                s.sendall(upgrade_request(origin=b"https://noisedeck.app"))
                self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 101"))
            reply = raw_http(syncd.port, upgrade_request(origin=b"https://other.app"))
            self.assertTrue(reply.startswith(b"HTTP/1.1 403"))
            self.assertEqual(syncd.stop(), 0)

    def test_cors_headers_only_for_cors_origins(self):
        def get(port, origin):
            req = b"GET /web/sync.js HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: " + origin + b"\r\n\r\n"
            return raw_http(port, req)

        # Without --cors-loopback a loopback dev server's page may act but not read responses.
        with Syncd() as plain:
            reply = get(plain.port, b"http://localhost:5173")
            self.assertTrue(reply.startswith(b"HTTP/1.1 200"), reply[:80])
            self.assertNotIn(b"Access-Control-Allow-Origin", reply)
        with Syncd("--allow-origin", "https://noisedeck.app", "--cors-loopback") as syncd:
            for origin in [b"https://noisedeck.app", b"http://localhost:5173"]:
                reply = get(syncd.port, origin)
                self.assertIn(b"Access-Control-Allow-Origin: " + origin + b"\r\n", reply)
                self.assertIn(b"Vary: Origin\r\n", reply)
            self.assertNotIn(b"Access-Control-Allow-Origin", get(syncd.port, b"https://other.app"))
            # Preflight: approved for a CORS origin and the methods and headers syncd takes,
            # refused (403, counted) for anything else; Sync-Client never passes a preflight.
            def preflight(origin, method=b"POST", headers=b"content-type"):
                return raw_http(syncd.port, b"OPTIONS /whep HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: " + origin +
                                b"\r\nAccess-Control-Request-Method: " + method +
                                b"\r\nAccess-Control-Request-Headers: " + headers + b"\r\n\r\n")
            reply = preflight(b"http://localhost:5173", headers=b"Authorization, Content-Type")
            self.assertTrue(reply.startswith(b"HTTP/1.1 204"), reply[:80])
            self.assertIn(b"Access-Control-Allow-Methods: GET, POST, DELETE", reply)
            self.assertIn(b"Access-Control-Allow-Origin: http://localhost:5173", reply)
            for refused in [preflight(b"https://other.app"), preflight(b"https://noisedeck.app", method=b"PUT"),
                            preflight(b"https://noisedeck.app", headers=b"sync-client")]:
                self.assertTrue(refused.startswith(b"HTTP/1.1 403"), refused[:80])
                self.assertNotIn(b"Access-Control-Allow-Methods", refused)
                # A refusal approves nothing, the origin included (docs/security.md).
                self.assertNotIn(b"Access-Control-Allow-", refused)
            counters = syncd.stats()["server"]
            self.assertEqual(counters["cors_preflights"], 1)
            self.assertEqual(counters["cors_preflight_refused"], 3)


class MethodNotAllowed(unittest.TestCase):
    def test_405_names_the_methods_of_that_resource(self):
        # docs/protocol.md: another method on a known resource gets 405 with its Allow; a path
        # of no known shape gets 404.
        def request(port, method, path):
            reply = raw_http(port, method + b" " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             b"Content-Length: 0\r\n\r\n")
            status = int(reply.split(b" ", 2)[1])
            allow = next((line.split(b": ", 1)[1] for line in reply.split(b"\r\n")
                          if line.lower().startswith(b"allow:")), None)
            return status, allow
        with Syncd() as syncd:
            self.assertEqual(request(syncd.port, b"GET", b"/streams/cam/credit"), (405, b"POST"))
            self.assertEqual(request(syncd.port, b"PUT", b"/streams/cam/credit"), (405, b"POST"))
            self.assertEqual(request(syncd.port, b"PUT", b"/streams/cam"), (405, b"GET"))
            self.assertEqual(request(syncd.port, b"DELETE", b"/whep/cam"), (405, b"POST"))
            self.assertEqual(request(syncd.port, b"GET", b"/whep/cam/0123456789abcdef"),
                             (405, b"DELETE"))
            self.assertEqual(request(syncd.port, b"POST", b"/stats"), (405, b"GET"))
            self.assertEqual(request(syncd.port, b"GET", b"/streams/cam/credit/x")[0], 404)
            self.assertEqual(request(syncd.port, b"GET", b"/streams/")[0], 404)
            counters = syncd.stats()["server"]
            self.assertEqual(counters["http_method_not_allowed"], 6)


class ConnectionLimit(unittest.TestCase):
    def test_over_limit_is_refused_and_counted(self):
        # Held connections that made their request (WebSockets); idle ones would be evicted
        # to make room instead (test_redteam_core.py).
        with Syncd("--max-connections", "4") as syncd:
            held = []
            for _ in range(4):
                s = socket.create_connection(("127.0.0.1", syncd.port), timeout=5)
                s.sendall(upgrade_request())
                self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 101"))
                held.append(s)
            extra = socket.create_connection(("127.0.0.1", syncd.port), timeout=5)
            try:
                self.assertIn(extra.recv(10), (b"",))
            except ConnectionResetError:
                pass
            for s in held:
                s.close()
            extra.close()
            time.sleep(0.2)
            self.assertGreaterEqual(syncd.stats()["server"]["connections_refused"], 1)
            self.assertEqual(syncd.stop(), 0)


if __name__ == "__main__":
    unittest.main()
