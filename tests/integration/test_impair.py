"""sync-impair between a Python UDP sender and receiver on loopback (docs/wan.md, "Impairment
proxy"): loss and delay near their settings, order kept without --fwd-reorder, replies relayed
back to the client, and the same seed giving the same fate log."""
import csv
import json
import os
import socket
import statistics
import struct
import subprocess
import tempfile
import threading
import time
import unittest

IMPAIR = os.environ.get("SYNC_IMPAIR", "../../build/release/tools/impair/sync-impair")
DATAGRAM = struct.Struct("!IQ")  # sequence, send time (CLOCK_MONOTONIC ns)
COUNT = 5000


class Proxy:
    def __init__(self, target_port, *args):
        self.csv = tempfile.NamedTemporaryFile(suffix=".csv", delete=False).name
        self.process = subprocess.Popen(
            [IMPAIR, "--listen", "127.0.0.1:0", "--to", f"127.0.0.1:{target_port}",
             "--log-csv", self.csv, *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        if not line.startswith("listening "):
            self.process.kill()
            raise RuntimeError(f"sync-impair did not start: {line!r} {self.process.stderr.read()}")
        self.port = int(line.rsplit(":", 1)[1])

    def stop(self):
        """SIGTERM; returns (per-second lines, final JSON summary)."""
        self.process.terminate()
        out, _ = self.process.communicate(timeout=10)
        lines = out.strip().splitlines()
        return lines[:-1], json.loads(lines[-1])

    def fates(self):
        with open(self.csv, newline="") as f:
            return [(row["direction"], int(row["index"]), row["fate"]) for row in csv.DictReader(f)]

    def cleanup(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.unlink(self.csv)


def udp_socket():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("127.0.0.1", 0))
    return s


def send_and_receive(proxy_port, receiver, count=COUNT, spacing_s=0.0004):
    """Sends count numbered datagrams through the proxy; returns [(sequence, delay_ms)] in
    arrival order. A thread blocked in recv() timestamps each arrival as it comes."""
    sender = udp_socket()
    received = []
    receiver.settimeout(0.05)
    done = threading.Event()

    def receive():
        while not done.is_set():
            try:
                data = receiver.recv(2048)
            except socket.timeout:
                continue
            now = time.monotonic_ns()
            sequence, sent_ns = DATAGRAM.unpack_from(data)
            received.append((sequence, (now - sent_ns) / 1e6))

    thread = threading.Thread(target=receive)
    thread.start()
    try:
        start = time.monotonic()
        for sequence in range(count):
            sender.sendto(DATAGRAM.pack(sequence, time.monotonic_ns()) + bytes(200),
                          ("127.0.0.1", proxy_port))
            # Pace to spacing_s per datagram, sleeping only when a whole millisecond is ahead.
            ahead = start + (sequence + 1) * spacing_s - time.monotonic()
            if ahead > 0.001:
                time.sleep(ahead)
        time.sleep(1.0)
    finally:
        done.set()
        thread.join()
        sender.close()
    return received


def scheduled_delays_ms(csv_path):
    """The proxy's own delay for each delivered datagram: deliver_us - arrival_us in its log."""
    with open(csv_path, newline="") as f:
        return [(float(row["deliver_us"]) - float(row["arrival_us"])) / 1e3
                for row in csv.DictReader(f) if row["deliver_us"]]


class ImpairProxy(unittest.TestCase):
    def run_proxy(self, *args):
        receiver = udp_socket()
        self.addCleanup(receiver.close)
        proxy = Proxy(receiver.getsockname()[1], *args)
        self.addCleanup(proxy.cleanup)
        received = send_and_receive(proxy.port, receiver)
        lines, summary = proxy.stop()
        return received, lines, summary, proxy.fates(), proxy.csv

    def test_loss_and_delay_near_the_settings(self):
        received, lines, summary, fates, proxy_csv = self.run_proxy(
            "--seed", "7", "--fwd-loss", "5", "--fwd-delay", "20", "--fwd-jitter", "5")
        lost = COUNT - len(received)
        # Binomial sd at 5000 packets and 5 %: 0.31 percentage points; allow 5 sd.
        self.assertAlmostEqual(lost / COUNT, 0.05, delta=0.016)
        self.assertEqual(summary["fwd"]["in"], COUNT)
        self.assertEqual(summary["fwd"]["drop_random"], lost)
        self.assertEqual(summary["fwd"]["out"], len(received))
        self.assertEqual(sum(1 for _, _, fate in fates if fate == "drop_random"), lost)
        # The proxy schedules each datagram 20 +- 5 ms after it arrived (uniform), and no sooner
        # than the one before it (FIFO without --fwd-reorder): at 0.4 ms spacing packets bunch
        # behind the slowest recent draw, so most wait close to 25 ms.
        scheduled = scheduled_delays_ms(proxy_csv)
        self.assertEqual(len(scheduled), len(received))
        self.assertGreaterEqual(min(scheduled), 15)
        self.assertLessEqual(max(scheduled), 25.001)
        self.assertGreater(statistics.mean(scheduled), 20)
        # The proxy sends on time: its mean lateness against the schedule (timerfd wake-up and
        # the send); at load average 10 on these 2 cores it measured 0.6 ms here and 2.6 ms with
        # sparse packets (each send then wakes an idle process), hence the bound.
        self.assertLess(summary["fwd"]["late_ms_mean"], 5.0)
        # On the wire (Python's send and receive threads included): the same, plus a little. The
        # tail is this shared machine's scheduling (2 cores, other builds), so only the median is
        # held to the setting.
        delays = sorted(d for _, d in received)
        self.assertGreaterEqual(delays[0], 15)
        self.assertLess(delays[len(delays) // 2], 25 + 1.5)
        print(f"\n  wire delay ms: min {delays[0]:.2f} median {delays[len(delays) // 2]:.2f} "
              f"p99 {delays[int(0.99 * len(delays))]:.2f}; proxy late ms: mean "
              f"{summary['fwd']['late_ms_mean']:.3f} max {summary['fwd']['late_ms_max']:.3f}")
        sequences = [s for s, _ in received]
        self.assertEqual(sequences, sorted(sequences), "reordered without --fwd-reorder")
        self.assertTrue(any(line.startswith("t=") and "fwd in=" in line for line in lines))

    def test_sparse_packets_see_the_jitter_distribution(self):
        receiver = udp_socket()
        self.addCleanup(receiver.close)
        proxy = Proxy(receiver.getsockname()[1], "--seed", "3", "--fwd-delay", "20",
                      "--fwd-jitter", "5", "--fwd-reorder")
        self.addCleanup(proxy.cleanup)
        received = send_and_receive(proxy.port, receiver, count=1000, spacing_s=0.002)
        _, summary = proxy.stop()
        scheduled = scheduled_delays_ms(proxy.csv)
        self.assertAlmostEqual(statistics.mean(scheduled), 20, delta=0.5)
        self.assertAlmostEqual(statistics.pstdev(scheduled), 5 / 3 ** 0.5, delta=0.3)
        delays = [d for _, d in received]
        self.assertEqual(len(delays), 1000)
        # On the wire: the schedule plus the proxy's lateness (each send wakes an idle process
        # here: measured 2.6 to 9.8 ms late on average at load average 10 on these 2 cores) plus
        # Python's own.
        late = summary["fwd"]["late_ms_mean"]
        self.assertGreaterEqual(statistics.median(delays), 19)
        self.assertLess(statistics.median(delays), 21.5 + late)
        self.assertGreaterEqual(min(delays), 15)
        self.assertGreaterEqual(min(scheduled), 15)
        self.assertLessEqual(max(scheduled), 25.001)
        # With --fwd-reorder and 10 ms of jitter over 2 ms spacing, some packets do cross.
        sequences = [s for s, _ in received]
        self.assertNotEqual(sequences, sorted(sequences))

    def test_same_seed_same_fate_log(self):
        args = ("--fwd-loss", "2", "--fwd-burst-loss", "3", "--fwd-burst-length", "3",
                "--fwd-dup", "1", "--fwd-delay", "2")
        _, _, first, fates_a, _ = self.run_proxy("--seed", "99", *args)
        _, _, second, fates_b, _ = self.run_proxy("--seed", "99", *args)
        _, _, _, fates_c, _ = self.run_proxy("--seed", "100", *args)
        self.assertEqual(len(fates_a), COUNT)
        self.assertEqual(fates_a, fates_b)
        self.assertNotEqual(fates_a, fates_c)
        counts = ("in", "out", "drop_random", "drop_burst", "duplicated")
        self.assertEqual([first["fwd"][k] for k in counts], [second["fwd"][k] for k in counts])
        dropped = sum(1 for _, _, fate in fates_a if fate.startswith("drop_"))
        self.assertAlmostEqual(dropped / COUNT, 0.02 + 0.03 - 0.02 * 0.03, delta=0.02)

    def test_replies_go_back_to_the_last_client(self):
        target = udp_socket()
        self.addCleanup(target.close)
        proxy = Proxy(target.getsockname()[1], "--seed", "1", "--rev-delay", "5")
        self.addCleanup(proxy.cleanup)
        client = udp_socket()
        self.addCleanup(client.close)
        client.settimeout(2)
        target.settimeout(2)
        for i in range(20):
            client.sendto(b"ping %d" % i, ("127.0.0.1", proxy.port))
            data, source = target.recvfrom(2048)
            self.assertEqual(data, b"ping %d" % i)
            sent = time.monotonic()
            target.sendto(b"pong %d" % i, source)
            self.assertEqual(client.recv(2048), b"pong %d" % i)
            self.assertGreaterEqual(time.monotonic() - sent, 0.004)
        _, summary = proxy.stop()
        self.assertEqual(summary["rev"]["in"], 20)
        self.assertEqual(summary["rev"]["out"], 20)


if __name__ == "__main__":
    unittest.main()
