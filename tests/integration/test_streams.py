"""HTTP stream receivers of a real syncd: tickets, the record format, credit and newest-wins
drops, and a clean end when the source goes away."""
import asyncio
import json
import socket
import struct
import time
import unittest

import websockets

from harness import Syncd, frame_bytes, frame_message, marker_pixels, raw_http

W, H = 64, 32
FRAME_BYTES = frame_bytes("rgba8", W, H)
RECORD = struct.Struct("<IHHQQQIIIIQII")
assert RECORD.size == 64


class Receiver:
    """A native HTTP stream reader over a raw socket."""

    def __init__(self, port, name, ticket, credit=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        target = f"/streams/{name}?ticket={ticket}" + (f"&credit={credit}" if credit else "")
        self.sock.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                break
            self.buffer += chunk
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ")[1]) if head else 0
        self.headers = {}
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            self.headers[k.strip().lower().decode()] = v.strip().decode()
        self.id = int(self.headers.get("x-sync-receiver", "0"))

    def _read(self, n):
        while len(self.buffer) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise EOFError
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def record(self):
        fields = RECORD.unpack(self._read(64))
        (magic, version, hbytes, seq, capture, publish, w, h, fmt, flags, digest, nbytes,
         dropped) = fields
        assert magic == 0x534E5953 and version == 1 and hbytes == 64
        # The payload is one frame of the record's own format and size, whatever the format.
        assert nbytes == frame_bytes(fmt, w, h), (fmt, w, h, nbytes)
        pixels = self._read(nbytes)
        return {"sequence": seq, "width": w, "height": h, "format": fmt, "dropped_before": dropped,
                "pixels": pixels, "hash": digest}

    def ended(self, timeout=5):
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b"" and not self.buffer
        except (ConnectionResetError, socket.timeout):
            return False

    def close(self):
        self.sock.close()


async def source(url, name, uses=1):
    ws = await websockets.connect(url, max_size=None)
    await ws.send(json.dumps({"type": "hello", "protocol": 1}))
    await ws.recv()
    await ws.send(json.dumps({"type": "stream.open", "name": name, "width": W, "height": H}))
    sid = json.loads(await ws.recv())["stream"]
    await ws.send(json.dumps({"type": "ticket.create", "stream": sid, "uses": uses}))
    ticket = json.loads(await ws.recv())
    assert ticket["type"] == "ticket", ticket
    return ws, sid, ticket["ticket"]


class HttpStreams(unittest.TestCase):
    def test_tickets_gate_receivers(self):
        async def scenario(syncd):
            ws, sid, ticket = await source(syncd.url, "gated")
            self.assertEqual(len(ticket), 32)
            self.assertTrue(raw_http(syncd.port, b"GET /streams/gated?ticket=" + b"0" * 32 +
                                     b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").startswith(b"HTTP/1.1 403"))
            self.assertTrue(raw_http(syncd.port, b"GET /streams/nope?ticket=" + ticket.encode() +
                                     b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").startswith(b"HTTP/1.1 404"))
            r = Receiver(syncd.port, "gated", ticket)
            self.assertEqual(r.status, 200)
            self.assertGreater(r.id, 0)
            r2 = Receiver(syncd.port, "gated", ticket)  # single use: spent
            self.assertEqual(r2.status, 403)
            # Only the source may hand out tickets.
            other = await websockets.connect(syncd.url)
            await other.send(json.dumps({"type": "hello", "protocol": 1}))
            await other.recv()
            await other.send(json.dumps({"type": "ticket.create", "stream": sid}))
            self.assertEqual(json.loads(await other.recv())["code"], "not_stream_owner")
            await other.close()
            r.close()
            r2.close()
            await ws.close()

        with Syncd() as syncd:
            asyncio.run(scenario(syncd))
            self.assertGreaterEqual(syncd.stats()["server"]["tickets_refused"], 2)
            self.assertEqual(syncd.stop(), 0)

    def test_source_report_shows_in_stats_for_the_owner_only(self):
        async def scenario(syncd):
            ws, sid, _ = await source(syncd.url, "reported")
            report = {"type": "stream.report", "stream": sid, "offered": 293, "sent": 179,
                      "in_flight": 0, "dropped": {"backpressure": 110, "readback_busy": 4}}
            await ws.send(json.dumps(report))
            # No reply on success; a bad report and a foreign one are refused with a code.
            await ws.send(json.dumps({**report, "dropped": {"Not A Reason": 1}}))
            self.assertEqual(json.loads(await ws.recv())["code"], "bad_message")
            other = await websockets.connect(syncd.url)
            await other.send(json.dumps({"type": "hello", "protocol": 1}))
            await other.recv()
            await other.send(json.dumps({**report, "offered": 1}))
            self.assertEqual(json.loads(await other.recv())["code"], "not_stream_owner")
            await other.send(json.dumps({**report, "stream": sid + 100}))
            self.assertEqual(json.loads(await other.recv())["code"], "unknown_stream")
            await other.close()
            src = syncd.stream_stats("reported")["source"]
            self.assertEqual((src["offered"], src["sent"], src["dropped_total"]), (293, 179, 114))
            self.assertEqual(src["dropped"], {"backpressure": 110, "readback_busy": 4})
            self.assertEqual(src["offered"], src["sent"] + src["dropped_total"] + src["in_flight"])
            await ws.close()

        with Syncd() as syncd:
            asyncio.run(scenario(syncd))
            self.assertEqual(syncd.stop(), 0)

    def test_syncd_sourced_streams_are_ticketed_by_its_own_pages_and_native_clients(self):
        async def ticket_from(syncd, origin, by_name=False):
            headers = {"Origin": origin} if origin else {}
            ws = await websockets.connect(syncd.url, extra_headers=headers)
            await ws.send(json.dumps({"type": "hello", "protocol": 1}))
            await ws.recv()
            sid = "pattern" if by_name else syncd.stream_stats("pattern")["id"]
            await ws.send(json.dumps({"type": "ticket.create", "stream": sid, "uses": 2}))
            reply = json.loads(await ws.recv())
            if reply.get("type") == "ticket":
                # A ticket lives while the connection that made it does.
                r = Receiver(syncd.port, "pattern", reply["ticket"])
                reply["status"] = r.status
                r.close()
            await ws.close()
            return reply

        with Syncd("--source", "pattern:64x32@30") as syncd:
            syncd.wait_for(lambda: syncd.stream_stats("pattern"))
            own = asyncio.run(ticket_from(syncd, f"http://127.0.0.1:{syncd.port}"))
            self.assertEqual(own["type"], "ticket", own)
            self.assertEqual(own["status"], 200)
            native = asyncio.run(ticket_from(syncd, None))
            self.assertEqual(native["type"], "ticket", native)
            # A page on another loopback origin may act, but not ticket syncd's own streams.
            dev = asyncio.run(ticket_from(syncd, "http://localhost:5173"))
            self.assertEqual(dev.get("code"), "not_stream_owner", dev)
            self.assertEqual(syncd.stop(), 0)
        # A page the operator listed with --allow-origin (a WHEP viewer elsewhere) may, by the
        # stream's id or by its name, as a WHEP URL names it.
        viewer = "https://viewer.example"
        with Syncd("--source", "pattern:64x32@30", "--allow-origin", viewer) as syncd:
            syncd.wait_for(lambda: syncd.stream_stats("pattern"))
            listed = asyncio.run(ticket_from(syncd, viewer))
            self.assertEqual((listed["type"], listed["status"]), ("ticket", 200), listed)
            named = asyncio.run(ticket_from(syncd, viewer, by_name=True))
            self.assertEqual((named["type"], named["name"], named["status"]),
                             ("ticket", "pattern", 200), named)
            self.assertEqual(named["stream"], syncd.stream_stats("pattern")["id"])
            # Another origin does not get as far as asking: its upgrade is refused (403).
            with self.assertRaises(websockets.exceptions.InvalidStatusCode):
                asyncio.run(ticket_from(syncd, "https://other.example"))

            async def by_name(name):
                async with websockets.connect(syncd.url) as ws:
                    await ws.send(json.dumps({"type": "hello", "protocol": 1}))
                    await ws.recv()
                    await ws.send(json.dumps({"type": "ticket.create", "stream": name}))
                    return json.loads(await ws.recv())
            self.assertEqual(asyncio.run(by_name("nosuch"))["code"], "unknown_stream")
            self.assertEqual(asyncio.run(by_name(""))["code"], "bad_message")
            self.assertEqual(syncd.stop(), 0)

    def test_frames_credit_and_newest_wins(self):
        async def scenario(syncd):
            ws, sid, ticket = await source(syncd.url, "credit")
            r = Receiver(syncd.port, "credit", ticket, credit=2)
            await asyncio.sleep(0.1)
            for seq in range(2):  # the receiver's two frames of credit
                await ws.send(frame_message(sid, seq, marker_pixels(FRAME_BYTES, seq, seq)))
            first, second = r.record(), r.record()
            self.assertEqual((first["sequence"], second["sequence"]), (0, 1))
            self.assertEqual(first["pixels"], marker_pixels(FRAME_BYTES, 0, 0))
            # Read first, so that 0 and 1 no longer count against the receiver's byte limit (2
            # frames): what happens to 2..9 then depends on credit alone, not on when syncd's
            # writes of 0 and 1 complete.
            for seq in range(2, 10):  # no credit left: newest wins
                await ws.send(frame_message(sid, seq, marker_pixels(FRAME_BYTES, seq, seq)))
            await ws.send(json.dumps({"type": "ping", "id": 1}))
            await ws.recv()
            # Grant one more: the newest pending frame (9) comes, 2..8 were dropped.
            await ws.send(json.dumps({"type": "credit", "receiver": r.id, "frames": 1}))
            third = r.record()
            self.assertEqual(third["sequence"], 9)
            self.assertEqual(third["dropped_before"], 7)
            # Credit by HTTP POST works too.
            reply = raw_http(syncd.port, f"POST /streams/credit/credit?receiver={r.id}&frames=1 "
                                         "HTTP/1.1\r\nHost: 127.0.0.1\r\nSync-Client: 1\r\n"
                                         "Content-Length: 0\r\n\r\n".encode())
            self.assertTrue(reply.startswith(b"HTTP/1.1 204"), reply)
            await ws.send(frame_message(sid, 10, marker_pixels(FRAME_BYTES, 10)))
            self.assertEqual(r.record()["sequence"], 10)
            await ws.send(json.dumps({"type": "credit", "receiver": 999, "frames": 1}))
            self.assertEqual(json.loads(await ws.recv())["code"], "unknown_receiver")
            # The source leaves: the receiver's response ends cleanly.
            await ws.close()
            self.assertTrue(r.ended())
            r.close()

        with Syncd() as syncd:
            asyncio.run(scenario(syncd))
            s = syncd.wait_for(lambda: (lambda s: s if s and not s["open"] else None)(
                syncd.stream_stats("credit")))
            rec = s["publishers"]["http"]["receivers"][0]
            self.assertEqual(rec["offered"], 11)
            self.assertEqual(rec["completed"], 4)
            self.assertEqual(rec["dropped"]["admission"], 7)
            self.assertEqual(rec["offered"],
                             rec["completed"] + rec["dropped_total"] + rec["pending"] +
                             rec["in_flight"])
            self.assertEqual(s["frames_verified"], 11)
            _, metrics = syncd.get("/metrics")
            self.assertIn('syncd_receiver_frames_dropped_total{stream="credit",stage="admission"} 7',
                          metrics)
            self.assertEqual(syncd.stop(), 0)


if __name__ == "__main__":
    unittest.main()
