"""The WAN relay between two real syncd (docs/wan.md): an x264 clip (tools/h264/make_clip.py)
sent by sync-producer as an h264 stream into the sending syncd, relayed over DTLS-keyed SRTP
through sync-impair (1 % loss, 20 +/- 5 ms each way) to the receiving syncd, whose test
publisher checks every access unit's bytes against the hash the frame carried. Re-keys every
3 s. Also: a peer with the wrong fingerprint is refused, strangers' datagrams are dropped and
counted, and the command line refuses a relay without a peer fingerprint. And a peer that
restarts: a sending syncd killed and started again (from another ephemeral port) resumes into
the receiver's same stream; a receiving syncd killed and started again on its port is found
again by the sender's liveness timeout.

The 30-minute soak and the 1080p figures are documented commands (docs/wan.md, "Figures"), not
CI's; this runs 720p60 for 15 s."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from harness import PRODUCER, SYNCD, Syncd, last_json

SANITIZED = os.environ.get("SYNC_SANITIZE", "")

IMPAIR = os.environ.get("SYNC_IMPAIR", "../../build/release/tools/impair/sync-impair")
MAKE_CLIP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "h264",
                         "make_clip.py")
W, H, FPS = 1280, 720, 60
ONE_WAY_MS = 20


def fingerprint(cert):
    out = subprocess.run([SYNCD, "--print-fingerprint", "--relay-cert", cert],
                         capture_output=True, text=True, timeout=30, check=True)
    return out.stdout.strip()


def relay_port(syncd):
    """The UDP port a --relay-listen syncd printed on its second line."""
    line = syncd.proc.stdout.readline()
    assert "relay listening on udp port" in line, line
    return int(line.split()[-1])


class Impair:
    def __init__(self, target_port, *args):
        self.proc = subprocess.Popen([IMPAIR, "--listen", "127.0.0.1:0", "--to",
                                      f"127.0.0.1:{target_port}", "--quiet", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("listening"), line + self.proc.stderr.read()
        self.port = int(line.split()[-1].rsplit(":", 1)[1])

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()
        self.proc.stderr.close()


def set_up_relay(cls, width, height, frames, bitrate_kbps):
    """A test class's relay fixture: a temporary directory (cls.tmp), an x264 clip in it
    (cls.clip), and two identities (cls.a for the sender, cls.b for the receiver) with their
    fingerprints (cls.fa, cls.fb)."""
    cls.tmp = tempfile.TemporaryDirectory()
    cls.clip = os.path.join(cls.tmp.name, "clip.264")
    made = subprocess.run([sys.executable, MAKE_CLIP, "--out", cls.clip, "--width", str(width),
                           "--height", str(height), "--fps", str(FPS), "--frames", str(frames),
                           "--bitrate", str(bitrate_kbps), "--keyint", "60"],
                          capture_output=True, text=True, timeout=240)
    assert made.returncode == 0, made.stderr
    cls.a = os.path.join(cls.tmp.name, "a.pem")
    cls.b = os.path.join(cls.tmp.name, "b.pem")
    cls.fa, cls.fb = fingerprint(cls.a), fingerprint(cls.b)


class Relay(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        set_up_relay(cls, W, H, 240, 8000)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def receiver(self, *extra):
        return Syncd("--publisher", "test", "--relay-listen", "127.0.0.1:0", "--relay-cert",
                     self.b, "--peer-fingerprint", self.fa, *extra)

    def sender(self, port, *extra, peer=None):
        return Syncd("--publisher", "test", "--relay-to", f"127.0.0.1:{port}", "--relay-cert",
                     self.a, "--peer-fingerprint", peer or self.fb, *extra)

    def test_a_raw_stream_is_encoded_decoded_and_every_marker_checked(self):
        """A page's raw frames (RGBA with the column marker) go into the sending syncd, which
        encodes them; the receiving syncd decodes them into an I420 stream of the same name and
        size, where its test publisher reads every frame's marker. (The 720p60 figures are the
        qualification arm's, test_relay_qualification.py.)"""
        seconds, width, height = 4, 640, 360
        with self.receiver() as rx:
            impair = Impair(relay_port(rx), "--seed", "12", "--fwd-loss", "1", "--fwd-delay",
                            str(ONE_WAY_MS), "--fwd-jitter", "5", "--rev-delay", str(ONE_WAY_MS),
                            "--rev-jitter", "5")
            try:
                with self.sender(impair.port) as tx:
                    tx.wait_for(lambda: tx.stats()["relay"]["state"] == "connected")
                    proc = subprocess.run([PRODUCER, "--url", tx.url, "--quiet", "--stream",
                                           "canvas", "--format", "rgba8", "--camera-marker",
                                           "--width", str(width), "--height", str(height),
                                           "--fps", str(FPS), "--seconds", str(seconds)],
                                          capture_output=True, text=True, timeout=120)
                    self.assertEqual(proc.returncode, 0, proc.stderr)
                    sent = last_json(proc.stdout)["frames_sent"]
                    # The sender's BYE closes the receiver's stream once its last frame is in.
                    rx.wait_for(lambda: (lambda src: src["stream"] is None and
                                         src["streams_opened"])(
                        rx.stats()["relay"]["receiver"]["source"]), timeout=30)
                    relayed = tx.stream_stats("canvas")["publishers"]["relay"]
                    stream = rx.stream_stats("canvas")
                    receiver = rx.stats()["relay"]["receiver"]
            finally:
                impair.close()
        print(f"\n  sent {sent}; relayed {relayed}\n  receiver stream {stream}\n  decoder "
              f"{receiver['source'].get('decoder')}", file=sys.stderr)
        encoder = relayed["encoder"]
        test = stream["publishers"]["test"]
        self.assertEqual(stream["format"], "i420")
        self.assertEqual((stream["width"], stream["height"]), (width, height))
        # Every frame accounted for at the sender, and every frame decoded at the receiver shows
        # its own marker: nothing corrupt, nothing reordered.
        self.assertEqual(relayed["offered"], sent)
        self.assertEqual(relayed["offered"], relayed["sent"] + sum(relayed["dropped"].values()))
        self.assertEqual(encoder["failed"], 0)
        self.assertEqual(test["marker_verified"], test["delivered"])
        self.assertEqual(stream["frames_verify_failed"], 0)
        self.assertEqual(test["sequence_reordered"], 0)
        if SANITIZED:
            # Under a sanitizer the encoder and decoder run several times slower: the stream
            # is checked, not its rate.
            self.assertGreaterEqual(test["delivered"], sent // 2)
            return
        # 1 % loss was repaired: every frame encoded, relayed and decoded.
        self.assertEqual(encoder["encoded"], sent)
        self.assertEqual(test["delivered"], sent)
        self.assertEqual(receiver["frames_dropped"], 0)

    def test_a_pages_h264_crosses_as_it_came_decoded_at_the_receiver_its_encoder_following(self):
        """A page's own H.264 (access units with the column marker, from an independent client
        that opened its stream with feedback) is relayed untouched; the receiving syncd decodes
        it into the stream's twin, whose test publisher reads every marker, and whose decoder's
        request for an IDR reaches the page through the relay (a PLI: stream.keyframe, reason
        relay); the relay's rate becomes the page encoder's target (stream.bitrate)."""
        import asyncio
        from test_encoded import connect, make_clip, send_all
        fps = 30
        units = make_clip(self.tmp.name, "page.264", 640, 360, fps * 3, fps)

        async def publish(tx):
            source = await connect(tx)
            stream = await source.open("page")
            await send_all(source, stream, units, pause=1 / fps)
            await asyncio.sleep(0.5)
            await source.request({"type": "stream.close", "stream": stream})
            await source.ws.close()
            return source

        with self.receiver() as rx:
            with self.sender(relay_port(rx)) as tx:
                tx.wait_for(lambda: tx.stats()["relay"]["state"] == "connected")
                source = asyncio.run(publish(tx))
                twin = rx.wait_for(lambda: (lambda t: t if t and not t["open"] else None)(
                    rx.stream_stats("page.decoded")))
                page = rx.stream_stats("page")
                sending_page = tx.stream_stats("page")
                relayed = sending_page["publishers"]["relay"]
        print(f"\n  page stream relayed {relayed}\n  events {source.events}", file=sys.stderr)
        self.assertEqual(page["format"], "h264")
        self.assertEqual(relayed["sent"], len(units), relayed)
        test = twin["publishers"]["test"]
        self.assertGreater(test["marker_verified"], len(units) // 2, test)
        self.assertEqual(test["verify_failed"]["marker_mismatch"], 0, test)
        # The receiver's twin asked for an IDR through the relay (its PLI is counted by reason
        # at the sender; one IDR answers the requests of 200 ms, so the page may have heard the
        # sender's own twin's first).
        self.assertGreaterEqual(sending_page["source_requests"]["keyframes"]["relay"], 1,
                                sending_page["source_requests"])
        self.assertGreaterEqual(len(source.keyframe_reasons()), 1)
        # The relay's rate (its estimate, or the start rate before one) reaches the page's
        # encoder, within the relay's bounds.
        rates = [e["bps"] for e in source.events if e["type"] == "stream.bitrate"]
        self.assertTrue(rates, source.events)
        self.assertTrue(all(100_000 <= r <= 20_000_000 for r in rates), rates)
        self.assertEqual(sending_page["source_requests"]["target_bps"], rates[-1])

    def test_a_clip_crosses_an_impaired_path_verified_across_re_keys(self):
        seconds = 15
        with self.receiver() as rx:
            impair = Impair(relay_port(rx), "--seed", "11", "--fwd-loss", "1", "--fwd-delay",
                            str(ONE_WAY_MS), "--fwd-jitter", "5", "--rev-delay", str(ONE_WAY_MS),
                            "--rev-jitter", "5")
            try:
                with self.sender(impair.port, "--dtls-rekey-interval", "3") as tx:
                    tx.wait_for(lambda: tx.stats()["relay"]["state"] == "connected")
                    # 8 slots: the relay publisher pins each access unit until the relay thread
                    # has packetized it; with 4 (3 pins) a relay thread slowed by a sanitizer
                    # refused a pin now and then (pin_refused: frames never relayed).
                    proc = subprocess.run([PRODUCER, "--url", tx.url, "--quiet", "--stream", "cam",
                                           "--format", "h264", "--h264", self.clip, "--width",
                                           str(W), "--height", str(H), "--fps", str(FPS),
                                           "--seconds", str(seconds), "--slots", "8"],
                                          capture_output=True, text=True, timeout=120)
                    self.assertEqual(proc.returncode, 0, proc.stderr)
                    sent = last_json(proc.stdout)["frames_sent"]
                    s = rx.wait_for(lambda: (lambda r: r if r["source"]["stream"] is None and
                                             r["source"]["streams_opened"] else None)(
                        rx.stats()["relay"]["receiver"]))
                    sender = tx.stats()["relay"]
                    relayed = tx.stream_stats("cam")["publishers"]["relay"]
                    receiver = rx.stats()["relay"]
                    stream = rx.stream_stats("cam")
            finally:
                impair.close()
        print(f"\n  sent {sent}; relayed {relayed}\n  receiver {s}\n  sender {sender['sender']} "
              f"keys {sender['keys']}", file=sys.stderr)
        # Every access unit the sending syncd took is accounted for: relayed, or dropped before
        # the relay by reason; on a release build it drops none. Under a sanitizer the relay
        # thread is several times slower (a re-key's handshake most of all) and now and then
        # has the publisher's 4 frames in flight: that frame is dropped (consumer_slow or
        # pin_refused), and this clip, relayed as it came, then waits for its next IDR
        # (awaiting_keyframe: 36 frames once under ASan, 3 another time).
        self.assertEqual(relayed["offered"], sent)
        self.assertEqual(relayed["offered"], relayed["sent"] + sum(relayed["dropped"].values()))
        if SANITIZED:
            slow = relayed["dropped"]["consumer_slow"] + relayed["dropped"]["pin_refused"]
            self.assertEqual(sum(relayed["dropped"].values()),
                             slow + relayed["dropped"]["awaiting_keyframe"], relayed)
            self.assertGreaterEqual(relayed["sent"], sent * 0.85)
        else:
            self.assertEqual(relayed["sent"], sent)
        # Every access unit the sender relayed reached the receiving syncd's publishers, each
        # byte checked: 0 frames lost after repair.
        self.assertEqual(stream["format"], "h264")
        self.assertEqual(stream["frames_accepted"], relayed["sent"])
        self.assertEqual(stream["frames_verified"], relayed["sent"])
        self.assertEqual(stream["frames_verify_failed"], 0)
        self.assertEqual(s["frames_dropped"], 0)
        self.assertEqual(s["frames_malformed"], 0)
        self.assertEqual(s["source"]["frames_without_stream"], 0)
        # The path did lose packets, and repair got them back.
        self.assertGreater(s["packets_recovered_fec"] + s["packets_recovered_rtx"], 0)
        # Re-keys ran (every 3 s) and cost nothing: no packet refused by SRTP.
        self.assertGreaterEqual(sender["keys"]["rekeys"], 3)
        self.assertGreaterEqual(receiver["keys"]["handshakes"], 4)
        self.assertEqual(receiver["refused"]["srtp"], 0)
        self.assertEqual(receiver["refused"]["foreign_datagrams"], 0)
        # Transport latency (sender accept to receiver complete; one clock on one machine):
        # the mean within the one-way delay plus one frame interval. The p99 is reported.
        transport = s["source"]["transport"]
        print(f"  transport mean {transport['mean_us'] / 1000:.1f} ms, max "
              f"{transport['max_us'] / 1000:.1f} ms", file=sys.stderr)
        self.assertLess(transport["mean_us"] / 1000, ONE_WAY_MS + 1000 / FPS)
        self.assertGreater(sender["rtt_us"], 2 * ONE_WAY_MS * 1000 * 0.75)

    def producer(self, tx, seconds):
        return subprocess.Popen([PRODUCER, "--url", tx.url, "--quiet", "--stream", "cam",
                                 "--format", "h264", "--h264", self.clip, "--width", str(W),
                                 "--height", str(H), "--fps", str(FPS), "--seconds",
                                 str(seconds)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

    @staticmethod
    def verified(syncd):
        stream = syncd.stream_stats("cam")
        return stream["frames_verified"] if stream else 0

    def test_a_killed_sender_restarted_on_another_port_resumes_into_the_same_stream(self):
        with self.receiver() as rx:
            port = relay_port(rx)
            with self.sender(port, "--dtls-rekey-interval", "3") as tx:
                tx.wait_for(lambda: tx.stats()["relay"]["state"] == "connected")
                producer = self.producer(tx, 60)
                try:
                    rx.wait_for(lambda: self.verified(rx) >= 60)
                    old_port = tx.stats()["relay"]["local_port"]
                    tx.stop(signal.SIGKILL)  # no BYE: the receiver's stream stays open
                finally:
                    producer.kill()
                    producer.wait()
            before = self.verified(rx)
            unique_before = rx.stream_stats("cam")["frames_unique"]
            with self.sender(port, "--dtls-rekey-interval", "3") as tx:
                tx.wait_for(lambda: tx.stats()["relay"]["state"] == "connected")
                self.assertNotEqual(tx.stats()["relay"]["local_port"], old_port)
                started = time.time()
                producer = self.producer(tx, 60)
                try:
                    rx.wait_for(lambda: self.verified(rx) >= before + 60, timeout=15)
                    resumed = time.time() - started
                finally:
                    producer.kill()
                    producer.wait()
            relay = rx.stats()["relay"]
            stream = rx.stream_stats("cam")
        print(f"\n  resumed: 60 more frames verified {resumed:.2f} s after the new producer "
              f"started; receiver peer {relay['peer_changes']}", file=sys.stderr)
        # The receiver re-bound to the new address on the completed handshake, saw a new sender,
        # and its frames went into the same local stream: opened once, every byte checked.
        self.assertEqual(relay["peer_changes"]["peer_rebinds"], 1)
        self.assertEqual(relay["peer_changes"]["peer_restarts"], 1)
        self.assertEqual(relay["receiver"]["source"]["streams_opened"], 1)
        self.assertEqual(stream["frames_verify_failed"], 0)
        # The new producer numbers its frames from the start again: the local stream's numbers
        # go on, so each of its frames counts as unique (not reordered).
        self.assertEqual(relay["receiver"]["source"]["sequence_restarts"], 1)
        self.assertGreaterEqual(stream["frames_unique"] - unique_before, 60)
        self.assertEqual(relay["receiver"]["frames_malformed"], 0)
        self.assertLess(resumed, 10)

    def test_a_killed_receiver_restarted_on_its_port_is_found_again(self):
        rx = self.receiver().__enter__()
        try:
            port = relay_port(rx)
            with self.sender(port) as tx:
                tx.wait_for(lambda: tx.stats()["relay"]["state"] == "connected")
                producer = self.producer(tx, 60)
                try:
                    rx.wait_for(lambda: self.verified(rx) >= 60)
                    rx.stop(signal.SIGKILL)
                    rx.__exit__(None, None, None)
                    killed = time.time()
                    rx = Syncd("--publisher", "test", "--relay-listen", f"127.0.0.1:{port}",
                               "--relay-cert", self.b, "--peer-fingerprint",
                               self.fa).__enter__()
                    self.assertEqual(relay_port(rx), port)
                    rx.wait_for(lambda: self.verified(rx) >= 1, timeout=15)
                    recovered = time.time() - killed
                    sender = tx.stats()["relay"]
                finally:
                    producer.kill()
                    producer.wait()
        finally:
            rx.__exit__(None, None, None)
        print(f"\n  recovered: first frame verified at the new receiver {recovered:.2f} s after "
              f"the old one was killed; sender peer {sender['peer_changes']}", file=sys.stderr)
        # No authenticated RTCP for the liveness timeout (3 s): the sender handshook afresh,
        # and the new receiver got frames (its stream opened from the sender's description).
        self.assertGreaterEqual(sender["peer_changes"]["peer_lost"], 1)
        self.assertLess(recovered, 8)

    def test_a_peer_with_another_fingerprint_is_refused(self):
        other = os.path.join(self.tmp.name, "other.pem")
        wrong = fingerprint(other)
        with self.receiver() as rx:
            port = relay_port(rx)
            with self.sender(port, peer=wrong) as tx:
                r = tx.wait_for(lambda: (lambda r: r if r["state"] == "failed" else None)(
                    tx.stats()["relay"]))
                self.assertGreaterEqual(r["keys"]["fingerprint_mismatches"], 1)
                self.assertGreaterEqual(r["keys"]["dtls_failures"], 1)
            # The receiver never took it, and still serves.
            self.assertNotEqual(rx.stats()["relay"]["state"], "connected")
            self.assertEqual(rx.get("/healthz")[0], 200)

    def test_a_receiver_pinning_another_fingerprint_is_told_and_the_sender_backs_off(self):
        """The receiver refuses the sender's certificate (a fatal alert): both ends count it,
        say it once on stderr with the fingerprints to fix, show failed with the reason in
        /stats; the sender stops encoding and asks again with backoff, not hundreds of times a
        second."""
        other = os.path.join(self.tmp.name, "other.pem")
        wrong = fingerprint(other)
        with Syncd("--publisher", "test", "--relay-listen", "127.0.0.1:0", "--relay-cert",
                   self.b, "--peer-fingerprint", wrong) as rx:
            port = relay_port(rx)
            with self.sender(port) as tx:
                tx.wait_for(lambda: tx.stats()["relay"]["state"] == "failed")
                rx.wait_for(lambda: rx.stats()["relay"]["state"] == "failed")
                producer = subprocess.Popen([PRODUCER, "--url", tx.url, "--quiet", "--stream",
                                             "canvas", "--format", "rgba8", "--width", "320",
                                             "--height", "180", "--fps", "30", "--seconds", "4"],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                first = tx.stats()["relay"]["keys"]["dtls_failures"]
                time.sleep(4)
                producer.wait(timeout=30)
                sender = tx.stats()["relay"]
                receiver = rx.stats()["relay"]
                relayed = tx.stream_stats("canvas")
                self.assertEqual(tx.stop(), 0)
                tx_err = tx.proc.stderr.read()
            self.assertEqual(rx.stop(), 0)
            rx_err = rx.proc.stderr.read()
        print(f"\n  sender {sender['keys']}\n  {sender['error']}\n  receiver {receiver['error']}",
              file=sys.stderr)
        # About five more attempts in 4 s (100 ms doubling to 4 s), not thousands.
        self.assertLessEqual(sender["keys"]["dtls_failures"] - first, 8)
        self.assertGreaterEqual(sender["keys"]["peer_alerts"], 1)
        self.assertEqual(sender["keys"]["last_failure"], "the peer refused the handshake")
        self.assertIn(self.fa, sender["error"])  # what the receiver must pin
        self.assertGreaterEqual(receiver["keys"]["fingerprint_mismatches"], 1)
        self.assertIn(self.fa, receiver["error"])  # what the sender presented
        self.assertIn(wrong, receiver["error"])
        # Said once each, however many attempts.
        self.assertEqual(tx_err.count("refused the handshake"), 1, tx_err)
        self.assertEqual(rx_err.count("presented certificate"), 1, rx_err)
        # A failed sender takes no frames: nothing offered to the relay, nothing encoded.
        publishers = relayed["publishers"] if relayed else {}
        self.assertEqual(publishers.get("relay", {}).get("offered", 0), 0, publishers)

    def test_strangers_datagrams_are_dropped_and_counted(self):
        with self.receiver() as rx:
            port = relay_port(rx)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.sendto(b"\x00\x01hello", ("127.0.0.1", port))  # not DTLS, RTP or RTCP
                s.sendto(bytes([0x80, 96]) + bytes(30), ("127.0.0.1", port))  # RTP, no session
                s.sendto(bytes([0x80, 200]) + bytes(30), ("127.0.0.1", port))  # RTCP, no session
            r = rx.wait_for(lambda: (lambda r: r if r["refused"]["foreign_datagrams"] >= 3
                                     else None)(rx.stats()["relay"]))
            self.assertEqual(r["state"], "waiting")
            self.assertEqual(rx.get("/healthz")[0], 200)

    def test_the_command_line_refuses_a_relay_it_cannot_trust(self):
        for args, says in ((["--relay-to", "127.0.0.1:5004"], "--peer-fingerprint"),
                           (["--relay-to", "127.0.0.1:5004", "--peer-fingerprint", "sha-1 AB"],
                            "--peer-fingerprint"),
                           (["--relay-to", "nowhere", "--peer-fingerprint", self.fa],
                            "HOST:PORT"),
                           (["--relay-to", "127.0.0.1:1", "--relay-listen", "0",
                             "--peer-fingerprint", self.fa], "one syncd")):
            with self.subTest(args=args):
                p = subprocess.run([SYNCD, "--port", "0", *args], capture_output=True, text=True,
                                   timeout=30)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(says, p.stderr)


if __name__ == "__main__":
    unittest.main()
