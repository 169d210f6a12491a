"""RFC 6455 behaviour of a real syncd: the control protocol through an independent client
(python3-websockets), and deliberate protocol violations through a raw socket."""
import asyncio
import json
import struct
import unittest

import websockets

from harness import RawWebSocket, Syncd, client_frame


class ControlProtocol(unittest.TestCase):
    def test_hello_welcome_and_errors(self):
        async def scenario(url):
            async with websockets.connect(url, max_size=None) as ws:
                await ws.send(json.dumps({"type": "stats"}))
                self.assertEqual(json.loads(await ws.recv())["code"], "hello_required")
                await ws.send(json.dumps({"type": "hello", "protocol": 2}))
                self.assertEqual(json.loads(await ws.recv())["code"], "protocol_unsupported")
                await ws.send(json.dumps({"type": "hello", "protocol": 1, "client": "test"}))
                welcome = json.loads(await ws.recv())
                self.assertEqual(welcome["type"], "welcome")
                self.assertEqual(welcome["protocol"], 1)
                self.assertIn("video.ingest", welcome["capabilities"])
                await ws.send("{not json")
                self.assertEqual(json.loads(await ws.recv())["code"], "bad_json")
                await ws.send(json.dumps({"type": "teleport"}))
                self.assertEqual(json.loads(await ws.recv())["code"], "unknown_type")
                await ws.send(json.dumps({"type": "ping", "id": 42}))
                self.assertEqual(json.loads(await ws.recv()), {"type": "pong", "id": 42})
                await ws.send(json.dumps({"type": "stats"}))
                stats = json.loads(await ws.recv())
                self.assertEqual(stats["type"], "stats")
                self.assertIn("streams", stats["stats"])
                # Fragmented text message through the library.
                await ws.send(iter(['{"type":', '"ping","id":"frag"}']))
                self.assertEqual(json.loads(await ws.recv())["id"], "frag")

        with Syncd() as syncd:
            asyncio.run(scenario(syncd.url))
            self.assertGreaterEqual(syncd.stats()["server"]["control_errors"], 4)
            self.assertEqual(syncd.stop(), 0)

    def test_close_handshake_echoes_code(self):
        with Syncd() as syncd:
            ws = RawWebSocket(syncd.port)
            ws.send(client_frame(8, struct.pack("!H", 1000) + b"bye"))
            self.assertEqual(ws.recv_close_code(), 1000)
            ws.close()
            self.assertEqual(syncd.stop(), 0)

    def test_sigterm_closes_with_1001(self):
        with Syncd() as syncd:
            ws = RawWebSocket(syncd.port)
            ws.send_text(json.dumps({"type": "hello", "protocol": 1}))
            self.assertEqual(ws.recv_json()["type"], "welcome")
            self.assertEqual(syncd.stop(), 0)
            self.assertEqual(ws.recv_close_code(), 1001)
            ws.close()


class ProtocolViolations(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.syncd = Syncd("--max-message-mb", "1").__enter__()

    @classmethod
    def tearDownClass(cls):
        assert cls.syncd.stop() == 0
        cls.syncd.__exit__(None, None, None)

    def expect_close(self, data, code):
        ws = RawWebSocket(self.syncd.port)
        ws.send(data)
        self.assertEqual(ws.recv_close_code(), code)
        ws.close()

    def test_unmasked_frame(self):
        self.expect_close(client_frame(1, b"{}", mask=False), 1002)

    def test_reserved_bits(self):
        self.expect_close(client_frame(1, b"{}", rsv=4), 1002)

    def test_unknown_opcode(self):
        self.expect_close(client_frame(3, b"x"), 1002)

    def test_oversized_control_frame(self):
        self.expect_close(client_frame(9, b"p" * 126), 1002)

    def test_fragmented_control_frame(self):
        self.expect_close(client_frame(9, b"p", fin=False), 1002)

    def test_continuation_without_message(self):
        self.expect_close(client_frame(0, b"x"), 1002)

    def test_bad_close_code(self):
        self.expect_close(client_frame(8, struct.pack("!H", 1005)), 1002)
        self.expect_close(client_frame(8, struct.pack("!H", 999)), 1002)
        self.expect_close(client_frame(8, b"\x03"), 1002)

    def test_invalid_utf8(self):
        self.expect_close(client_frame(1, b'{"a":"\xff"}'), 1007)

    def test_invalid_utf8_across_fragments(self):
        # U+20AC split between fragments is fine; a truncated sequence at the end is not.
        ok = RawWebSocket(self.syncd.port)
        ok.send(client_frame(1, b'{"type":"ping","id":"\xe2\x82', fin=False) +
                client_frame(0, b'\xac"}'))
        self.assertEqual(ok.recv_json()["code"], "hello_required")
        ok.close()
        self.expect_close(client_frame(1, b'{"a":"\xe2\x82', fin=False) + client_frame(0, b'"}'),
                          1007)

    def test_too_big_decided_from_header(self):
        # Declares 2 MiB but sends no payload: the close must come from the header alone.
        self.expect_close(client_frame(2, b"", declared_length=2 << 20)[:14], 1009)

    def test_ping_answered_inside_fragmented_message(self):
        ws = RawWebSocket(self.syncd.port)
        ws.send(client_frame(1, b'{"type":"hello",', fin=False))
        ws.send(client_frame(9, b"mid"))
        op, payload = ws.recv_frame()
        self.assertEqual((op, payload), (10, b"mid"))
        ws.send(client_frame(0, b'"protocol":1}'))
        self.assertEqual(ws.recv_json()["type"], "welcome")
        ws.close()

    def test_server_survives_and_counts(self):
        self.expect_close(client_frame(1, b"{}", mask=False), 1002)
        stats = self.syncd.stats()["server"]
        self.assertGreaterEqual(stats["ws_close_1002"], 1)
        self.assertEqual(self.syncd.get("/healthz"), (200, "ok"))


if __name__ == "__main__":
    unittest.main()
