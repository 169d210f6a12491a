"""Red team, resources: hostile clients against a real syncd (docs/security.md, "Crashes and
starvation"). Each case sends its input, expects the documented refusal and its counter, and
checks that /healthz still answers."""
import contextlib
import json
import resource
import signal
import socket
import threading
import time
import unittest

from harness import RawWebSocket, Syncd, client_frame, frame_message, marker_pixels

MIB = 1 << 20


class Producer(RawWebSocket):
    """A WebSocket client speaking the control protocol."""

    def __init__(self, port):
        super().__init__(port)
        self.send_text(json.dumps({"type": "hello", "protocol": 1}))
        assert self.recv_json()["type"] == "welcome"

    def request(self, message):
        self.send_text(json.dumps(message))
        return self.recv_json()

    def open(self, name, width=64, height=32, slots=4):
        return self.request({"type": "stream.open", "name": name, "width": width,
                             "height": height, "slots": slots})


class RedTeamCase(unittest.TestCase):
    def assert_healthy(self, syncd):
        self.assertEqual(syncd.get("/healthz"), (200, "ok"))


class DeepJson(RedTeamCase):
    def test_deeply_nested_ping_is_refused_and_the_connection_stays(self):
        with Syncd() as syncd:
            ws = Producer(syncd.port)
            deep = '{"type":"ping","id":' + "[" * 75_000 + "]" * 75_000 + "}"
            ws.send_text(deep)
            reply = ws.recv_json()
            self.assertEqual(reply["type"], "error")
            self.assertEqual(reply["code"], "bad_json")
            self.assertIn("nested deeper than 32", reply["message"])
            self.assertEqual(ws.request({"type": "ping", "id": 7}), {"type": "pong", "id": 7})
            self.assertGreaterEqual(syncd.stats()["server"]["control_errors"], 1)
            self.assert_healthy(syncd)


class MalformedMessages(RedTeamCase):
    def test_broken_json_gets_bad_json(self):
        with Syncd() as syncd:
            ws = Producer(syncd.port)
            ws.send_text('{"type":')
            reply = ws.recv_json()
            self.assertEqual((reply["type"], reply["code"]), ("error", "bad_json"))
            ws.send_text('["not", "an", "object"]')
            self.assertEqual(ws.recv_json()["code"], "bad_message")
            self.assert_healthy(syncd)

    def test_invalid_utf8_text_closes_1007(self):
        with Syncd() as syncd:
            ws = Producer(syncd.port)
            ws.send(client_frame(1, b'{"type":"ping","id":"\xff\xfe"}'))
            self.assertEqual(ws.recv_close_code(), 1007)
            self.assertGreaterEqual(syncd.stats()["server"]["ws_close_1007"], 1)
            self.assert_healthy(syncd)

    def test_text_over_the_limit_closes_1009(self):
        with Syncd() as syncd:
            ws = Producer(syncd.port)
            ws.send(client_frame(1, b" " * 16, declared_length=(1 << 20) + 1))
            self.assertEqual(ws.recv_close_code(), 1009)
            self.assertGreaterEqual(syncd.stats()["server"]["ws_close_1009"], 1)
            self.assert_healthy(syncd)


class IdleConnections(RedTeamCase):
    @contextlib.contextmanager
    def start(self, *args):
        """syncd inherits the usual soft descriptor limit (1,024); this process, which holds
        the idle sockets, then takes its hard limit."""
        limits = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, limits[1]), limits[1]))
        try:
            syncd = Syncd(*args).__enter__()
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (limits[1], limits[1]))
        try:
            yield syncd
        finally:
            syncd.__exit__(None, None, None)

    def test_a_thousand_silent_sockets_leave_healthz_and_producers_served(self):
        # 1,015 silent sockets plus syncd's own descriptors exceed the usual soft limit of
        # 1,024, which syncd raises at start.
        with self.start("--silent-timeout-ms", "60000") as syncd:
            idle = [socket.create_connection(("127.0.0.1", syncd.port)) for _ in range(1015)]
            try:
                answered = sum(syncd.get("/healthz") == (200, "ok") for _ in range(20))
                self.assertEqual(answered, 20)
                ws = Producer(syncd.port)
                self.assertEqual(ws.open("after-flood")["type"], "stream.opened")
                ws.close()
            finally:
                for s in idle:
                    s.close()
            self.assert_healthy(syncd)

    def test_at_the_cap_the_oldest_silent_socket_makes_room(self):
        with self.start("--max-connections", "100", "--silent-timeout-ms", "60000") as syncd:
            idle = [socket.create_connection(("127.0.0.1", syncd.port)) for _ in range(300)]
            try:
                self.assert_healthy(syncd)
                ws = Producer(syncd.port)
                self.assertEqual(ws.open("at-cap")["type"], "stream.opened")
                server = syncd.stats()["server"]
                self.assertGreaterEqual(server["connections_evicted"], 200)
                self.assertEqual(server["connections_refused"], 0)
                ws.close()
            finally:
                for s in idle:
                    s.close()

    def test_silent_sockets_are_closed_after_the_silent_timeout(self):
        with Syncd("--silent-timeout-ms", "500") as syncd:
            idle = [socket.create_connection(("127.0.0.1", syncd.port), timeout=5)
                    for _ in range(20)]
            try:
                for s in idle:
                    self.assertEqual(s.recv(1), b"")  # closed by syncd, without a reply
                self.assertGreaterEqual(syncd.stats()["server"]["silent_closes"], 20)
            finally:
                for s in idle:
                    s.close()
            self.assert_healthy(syncd)


class StreamLimits(RedTeamCase):
    def test_one_connection_cannot_take_every_stream(self):
        with Syncd("--max-streams-per-connection", "4") as syncd:
            greedy = Producer(syncd.port)
            for i in range(4):
                self.assertEqual(greedy.open(f"g{i}")["type"], "stream.opened")
            refused = greedy.open("g4")
            self.assertEqual((refused["type"], refused["code"]),
                             ("error", "connection_stream_limit"))
            other = Producer(syncd.port)
            self.assertEqual(other.open("other")["type"], "stream.opened")
            self.assertEqual(syncd.stats()["open_refused"]["connection_stream_limit"], 1)
            self.assert_healthy(syncd)

    def test_one_connection_cannot_take_the_pool_memory_every_other_needs(self):
        # Half of --max-pool-mb per connection by default: 32 of 64 MiB.
        with Syncd("--max-pool-mb", "64") as syncd:
            greedy = Producer(syncd.port)
            self.assertEqual(greedy.open("g0", 1920, 1080, 4)["type"], "stream.opened")  # 31.6 MiB
            refused = greedy.open("g1", 1920, 1080, 4)
            self.assertEqual((refused["type"], refused["code"]),
                             ("error", "connection_memory_limit"))
            other = Producer(syncd.port)
            self.assertEqual(other.open("other", 1920, 1080, 4)["type"], "stream.opened")
            self.assertEqual(syncd.stats()["open_refused"]["connection_memory_limit"], 1)
            self.assert_healthy(syncd)

    def test_the_pool_budget_binds(self):
        with Syncd("--max-pool-mb", "48", "--max-pool-mb-per-connection", "48") as syncd:
            ws = Producer(syncd.port)
            refused = ws.open("big", 1920, 1080, 8)  # 8 x 7.9 MiB
            self.assertEqual((refused["type"], refused["code"]), ("error", "no_memory"))
            self.assertEqual(ws.open("fits", 1920, 1080, 4)["type"], "stream.opened")
            self.assertEqual(syncd.stats()["open_refused"]["no_memory"], 1)
            self.assert_healthy(syncd)

    def test_a_huge_pool_is_faulted_in_without_holding_the_loop(self):
        # 4096x4096 RGBA x 16 slots = 1 GiB: seconds of page faults, on a pool thread.
        with Syncd() as syncd:
            ws = Producer(syncd.port)
            latencies = []
            done = threading.Event()

            def poll():
                while not done.is_set():
                    start = time.monotonic()
                    self.assertEqual(syncd.get("/healthz"), (200, "ok"))
                    latencies.append(time.monotonic() - start)
                    time.sleep(0.01)

            poller = threading.Thread(target=poll)
            poller.start()
            try:
                start = time.monotonic()
                opened = ws.open("huge", 4096, 4096, 16)
                took = time.monotonic() - start
            finally:
                done.set()
                poller.join()
            self.assertEqual(opened["type"], "stream.opened", opened)
            # The loop answered throughout: no /healthz waited for the page faults.
            self.assertGreater(len(latencies), 3, f"open took {took:.2f} s")
            self.assertLess(max(latencies), 0.25, f"open took {took:.2f} s")
            self.assertGreaterEqual(syncd.stats()["process"]["pool_bytes"], 1 << 30)


class Tickets(RedTeamCase):
    def test_a_connection_cannot_fill_the_ticket_store(self):
        with Syncd() as syncd:
            greedy = Producer(syncd.port)
            sid = greedy.open("greedy")["stream"]
            for _ in range(64):
                self.assertEqual(greedy.request({"type": "ticket.create", "stream": sid})["type"],
                                 "ticket")
            refused = greedy.request({"type": "ticket.create", "stream": sid})
            self.assertEqual((refused["type"], refused["code"]), ("error", "too_many_tickets"))
            other = Producer(syncd.port)
            osid = other.open("other")["stream"]
            self.assertEqual(other.request({"type": "ticket.create", "stream": osid})["type"],
                             "ticket")
            self.assertEqual(syncd.stats()["server"]["tickets_live"], 65)
            # Tickets go with their stream, and with the connection that made them.
            self.assertEqual(other.request({"type": "stream.close", "stream": osid})["type"],
                             "stream.closed")
            self.assertEqual(syncd.stats()["server"]["tickets_live"], 64)
            greedy.close()
            syncd.wait_for(lambda: syncd.stats()["server"]["tickets_live"] == 0, timeout=5)
            self.assert_healthy(syncd)


class ClosedStreamUnderStalledReceiver(RedTeamCase):
    def test_the_pool_is_counted_until_unmapped_and_the_receiver_is_cut(self):
        w, h, slots = 2048, 2048, 4  # 16 MiB frames, a 64 MiB pool
        frame = w * h * 4
        with Syncd("--max-pool-mb", "100", "--max-pool-mb-per-connection", "100") as syncd:
            source = Producer(syncd.port)
            sid = source.open("a", w, h, slots)["stream"]
            ticket = source.request({"type": "ticket.create", "stream": sid})["ticket"]
            receiver = socket.socket()
            receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            receiver.connect(("127.0.0.1", syncd.port))
            receiver.sendall(f"GET /streams/a?ticket={ticket}&credit=8 HTTP/1.1\r\n"
                             "Host: 127.0.0.1\r\n\r\n".encode())
            time.sleep(0.2)  # admitted; it never reads again
            for seq in range(4):
                source.send(client_frame(2, frame_message(sid, seq, marker_pixels(frame, seq))))
            syncd.wait_for(lambda: syncd.stream_stats("a")["frames_accepted"] == 4, timeout=20)
            self.assertEqual(source.request({"type": "stream.close", "stream": sid})["type"],
                             "stream.closed")
            # The stalled receiver still holds a frame: the pool is mapped, so it is counted.
            self.assertGreaterEqual(syncd.stats()["process"]["pool_bytes"], 64 * MIB)
            refused = source.open("b", w, h, slots)
            self.assertEqual((refused["type"], refused["code"]), ("error", "no_memory"))
            # Within the grace period plus a tick, the receiver is cut and the pool unmapped.
            start = time.monotonic()
            syncd.wait_for(lambda: syncd.stats()["process"]["pool_bytes"] == 0, timeout=5)
            self.assertLess(time.monotonic() - start, 3.0)
            self.assertEqual(source.open("b", w, h, slots)["type"], "stream.opened")
            departed = syncd.stream_stats("a")["publishers"]["http"]["receivers"]
            self.assertTrue(departed[0]["cut_at_close"], departed)
            receiver.close()
            self.assert_healthy(syncd)


class CheapRequests(RedTeamCase):
    def test_pipelined_stats_from_clients_that_do_not_read(self):
        with Syncd() as syncd:
            clients = [Producer(syncd.port) for _ in range(4)]
            request = client_frame(1, b'{"type":"stats"}')
            burst = request * (64 * 1024 // len(request))
            for c in clients:
                c.sock.setblocking(False)
                try:
                    c.sock.sendall(burst)
                except BlockingIOError:
                    pass  # syncd stopped reading it: the point
            start = time.monotonic()
            self.assert_healthy(syncd)
            self.assertLess(time.monotonic() - start, 0.5)
            server = syncd.stats()["server"]
            self.assertGreaterEqual(server["reads_paused_for_output"], 4)
            # No loop iteration was held for long by building replies.
            busy = syncd.stats()["process"]["loop_iteration_busy"]
            self.assertLess(busy["max_us"], 200_000, busy)
            for c in clients:
                c.close()


class Shutdown(RedTeamCase):
    def test_sigterm_mid_frame_ends_cleanly_and_keeps_what_was_accepted(self):
        w, h = 256, 128
        frame = w * h * 4
        with Syncd() as syncd:
            source = Producer(syncd.port)
            sid = source.open("term", w, h)["stream"]
            ticket = source.request({"type": "ticket.create", "stream": sid})["ticket"]
            receiver = socket.create_connection(("127.0.0.1", syncd.port), timeout=10)
            receiver.sendall(f"GET /streams/term?ticket={ticket}&credit=64 HTTP/1.1\r\n"
                             "Host: 127.0.0.1\r\n\r\n".encode())
            time.sleep(0.2)
            for seq in range(3):
                source.send(client_frame(2, frame_message(sid, seq, marker_pixels(frame, seq))))
            syncd.wait_for(lambda: syncd.stream_stats("term")["frames_accepted"] == 3)
            half = client_frame(2, frame_message(sid, 3, marker_pixels(frame, 3)))
            source.send(half[: len(half) // 2])
            time.sleep(0.1)
            start = time.monotonic()
            self.assertEqual(syncd.stop(signal.SIGTERM, timeout=10), 0)
            self.assertLess(time.monotonic() - start, 3.0)
            # Every accepted frame reached the receiver before its response ended.
            received = b""
            while True:
                chunk = receiver.recv(1 << 20)
                if not chunk:
                    break
                received += chunk
            for seq in range(3):
                marker = seq.to_bytes(8, "little") + (~seq & (2**64 - 1)).to_bytes(8, "little")
                self.assertIn(marker, received)
            receiver.close()
            source.close()


if __name__ == "__main__":
    unittest.main()
