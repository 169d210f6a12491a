"""sync-headtrack end to end: bridge --replay sends real datagrams, probe/bridge exit codes with no
devices. Stdlib only; the tool path comes from $SYNC_HEADTRACK."""
import json
import os
import socket
import struct
import subprocess
import tempfile
import unittest

TOOL = os.environ.get("SYNC_HEADTRACK", "")
HERE = os.path.dirname(os.path.abspath(__file__))
REPLAY = os.path.join(HERE, "..", "data", "headtrack", "synthetic.replay")


def bind_pair():
    """Two UDP sockets on consecutive loopback ports (OpenTrack port, JSON port)."""
    for _ in range(50):
        a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        a.bind(("127.0.0.1", 0))
        port = a.getsockname()[1]
        if port >= 65534:
            a.close()
            continue
        b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            b.bind(("127.0.0.1", port + 1))
        except OSError:
            a.close()
            b.close()
            continue
        return a, b, port
    raise RuntimeError("no free consecutive port pair")


def drain(sock):
    out = []
    sock.settimeout(0.5)
    try:
        while True:
            data, addr = sock.recvfrom(4096)
            out.append((data, addr))
    except socket.timeout:
        pass
    return out


class HeadtrackCli(unittest.TestCase):
    def setUp(self):
        # The CLI is part of the build: without it the tests fail rather than skip.
        self.assertTrue(TOOL and os.access(TOOL, os.X_OK), f"SYNC_HEADTRACK={TOOL!r} is not a program")

    def run_tool(self, *args, timeout=30):
        return subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=timeout)

    def test_version(self):
        r = self.run_tool("version")
        self.assertEqual(r.returncode, 0)
        self.assertIn("sync-headtrack", r.stdout)

    def test_no_devices_exit_codes(self):
        with tempfile.TemporaryDirectory() as empty:
            probe = self.run_tool("probe", "--sysfs-root", empty, "--dev-root", empty)
            self.assertEqual(probe.returncode, 2, probe.stdout + probe.stderr)
            bridge = self.run_tool("bridge", "--seconds", "1", "--sysfs-root", empty,
                                   "--dev-root", empty)
            self.assertEqual(bridge.returncode, 3, bridge.stderr)

    def test_bad_arguments(self):
        self.assertEqual(self.run_tool("bridge", "--port", "65535").returncode, 1)
        self.assertEqual(self.run_tool("bridge", "--port", "0").returncode, 1)
        self.assertEqual(self.run_tool("bridge", "--bogus").returncode, 1)
        self.assertEqual(self.run_tool("bridge", "--axis-map", "XXY",
                                       "--replay", REPLAY).returncode, 1)
        self.assertEqual(self.run_tool("bridge", "--replay", "/nonexistent").returncode, 1)

    def test_socket_failure(self):
        r = self.run_tool("bridge", "--replay", REPLAY, "--host", "no.such.host.invalid")
        self.assertEqual(r.returncode, 4, r.stderr)

    def test_bridge_replay_end_to_end(self):
        ot, js, port = bind_pair()
        try:
            r = self.run_tool("bridge", "--replay", REPLAY, "--seconds", "10", "--port",
                              str(port), "--smoothing", "0")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            poses = drain(ot)
            telemetry = drain(js)
        finally:
            ot.close()
            js.close()
        # 100 reports; one carries 0x8000 and is rejected, one has another report ID.
        self.assertEqual(len(poses), 99)
        self.assertEqual(len(telemetry), 99)
        self.assertEqual({addr for _, addr in poses}, {addr for _, addr in telemetry})
        yaws = []
        for data, _ in poses:
            self.assertEqual(len(data), 48)
            values = struct.unpack("<6d", data)
            self.assertEqual(values[:3], (0.0, 0.0, 0.0))
            for v in values:
                self.assertTrue(v == v and abs(v) <= 180.0)
            yaws.append(values[3])
        # The head turns to +40 deg about Z; the default mapping outputs yaw = -rot(Z).
        self.assertLess(min(yaws), -30.0)
        seqs = []
        for data, _ in telemetry:
            obj = json.loads(data)
            for key in ("version", "device", "rotationVector", "quaternion", "yprDegrees",
                        "gyroscope", "resetCounter", "packetsPerSecond", "discontinuityCount",
                        "seq", "timestampNs"):
                self.assertIn(key, obj)
            self.assertEqual(len(obj["quaternion"]), 4)
            seqs.append(obj["seq"])
        self.assertEqual(seqs, list(range(99)))
        last = json.loads(telemetry[-1][0])
        self.assertEqual(last["resetCounter"], 1)
        self.assertEqual(last["discontinuityCount"], 1)
        self.assertEqual(last["gyroscope"], [0, 0, 0])
        self.assertTrue(last["device"].startswith("replay:"))
        # Real time: 4 s of reports take about 4 s of timestamps.
        span_s = (last["timestampNs"] - json.loads(telemetry[0][0])["timestampNs"]) / 1e9
        self.assertGreater(span_s, 3.0)

    def test_bridge_seconds_limit_and_record(self):
        with tempfile.TemporaryDirectory() as tmp:
            record = os.path.join(tmp, "out.replay")
            ot, js, port = bind_pair()
            try:
                r = self.run_tool("bridge", "--replay", REPLAY, "--seconds", "1", "--port",
                                  str(port), "--record", record)
            finally:
                ot.close()
                js.close()
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(record) as f:
                lines = [l for l in f if l.strip() and not l.startswith("#")]
            self.assertTrue(lines[0].startswith("05 20 09 e1"))
            self.assertTrue(lines[1].startswith("feature 02 23 41"))
            self.assertGreater(len(lines), 10)
            self.assertLess(len(lines), 60)  # stopped after ~1 s of a 4 s file


if __name__ == "__main__":
    unittest.main()
