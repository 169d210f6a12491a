"""Red team against the WAN relay's UDP port while media flows (docs/wan.md, "Threat model";
issue 16): two real syncd relay an x264 clip; meanwhile a stranger on another port floods the
receiver with DTLS ClientHellos (spoofable single datagrams), sends garbage, forged SRTP under
the live session's SSRC-less guesses, and runs full DTLS handshakes with `openssl s_client`
under a certificate the receiver was not told to trust. Asserted: every access unit still
reaches the receiver's test publisher intact, the stranger's traffic is refused and counted,
the daemon keeps serving, and a ClientHello never draws more bytes back than it carried
(no amplification: the cookie exchange answers statelessly, or not at all)."""
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest

from harness import PRODUCER, Syncd, last_json
from test_relay import relay_port, set_up_relay

W, H, FPS = 1280, 720, 60
SECONDS = 8


def client_hello(random_bytes):
    """A DTLS 1.2 ClientHello record (RFC 6347 4.2.2) without a cookie, offering
    ECDHE-ECDSA-AES128-GCM-SHA256 and use_srtp AEAD_AES_128_GCM (RFC 5764 4.1.1, RFC 7714)."""
    extensions = (struct.pack("!HH", 14, 5) + struct.pack("!HH", 2, 0x0007) + b"\x00"  # use_srtp
                  + struct.pack("!HHH", 10, 4, 2) + struct.pack("!H", 23)  # groups: P-256
                  + struct.pack("!HHB", 11, 2, 1) + b"\x00"  # ec_point_formats: uncompressed
                  + struct.pack("!HHH", 13, 4, 2) + struct.pack("!H", 0x0403))  # ecdsa_sha256
    body = (b"\xfe\xfd" + random_bytes + b"\x00" + b"\x00"  # version, random, session, cookie
            + struct.pack("!H", 2) + struct.pack("!H", 0xC02B) + b"\x01\x00"
            + struct.pack("!H", len(extensions)) + extensions)
    handshake = (b"\x01" + len(body).to_bytes(3, "big") + struct.pack("!H", 0)
                 + (0).to_bytes(3, "big") + len(body).to_bytes(3, "big") + body)
    return (b"\x16\xfe\xff" + struct.pack("!H", 0) + (0).to_bytes(6, "big")
            + struct.pack("!H", len(handshake)) + handshake)


class RelayRedTeam(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        set_up_relay(cls, W, H, 120, 6000)
        cls.stranger_cert = os.path.join(cls.tmp.name, "stranger.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=stranger", "-days",
                        "1", "-keyout", cls.stranger_cert, "-out", cls.stranger_cert],
                       capture_output=True, check=True, timeout=30)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_media_survives_a_stranger_flooding_the_relay_port(self):
        with Syncd("--publisher", "test", "--relay-listen", "127.0.0.1:0", "--relay-cert",
                   self.b, "--peer-fingerprint", self.fa) as rx:
            port = relay_port(rx)
            with Syncd("--publisher", "test", "--relay-to", f"127.0.0.1:{port}", "--relay-cert",
                       self.a, "--peer-fingerprint", self.fb, "--dtls-rekey-interval", "2") as tx:
                tx.wait_for(lambda: tx.stats()["relay"]["state"] == "connected")
                producer = subprocess.Popen(
                    [PRODUCER, "--url", tx.url, "--quiet", "--stream", "cam", "--format", "h264",
                     "--h264", self.clip, "--width", str(W), "--height", str(H), "--fps",
                     str(FPS), "--seconds", str(SECONDS)],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                stop = threading.Event()
                flood = {"hellos": 0, "hello_bytes": 0, "answers": 0, "answer_bytes": 0,
                         "garbage": 0}

                def flood_hellos():
                    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                        s.setblocking(False)
                        while not stop.is_set():
                            for _ in range(50):
                                hello = client_hello(os.urandom(32))
                                s.sendto(hello, ("127.0.0.1", port))
                                flood["hellos"] += 1
                                flood["hello_bytes"] += len(hello)
                                # Garbage and forged SRTP (RTP version, random SSRC and tag).
                                s.sendto(os.urandom(60), ("127.0.0.1", port))
                                s.sendto(bytes([0x80, 96]) + os.urandom(100), ("127.0.0.1", port))
                                flood["garbage"] += 2
                            try:
                                while True:
                                    flood["answer_bytes"] += len(s.recv(65536))
                                    flood["answers"] += 1
                            except BlockingIOError:
                                pass
                            time.sleep(0.01)

                def wrong_certificate_handshakes():
                    # Full handshakes (the cookie exchange, then certificates) by a stranger,
                    # each given 3 s; one the receiver ignores just times out.
                    attempts = 0
                    while not stop.is_set():
                        attempts += 1
                        try:
                            subprocess.run(
                                ["openssl", "s_client", "-dtls1_2", "-connect",
                                 f"127.0.0.1:{port}", "-cert", self.stranger_cert, "-key",
                                 self.stranger_cert, "-use_srtp", "SRTP_AEAD_AES_128_GCM",
                                 "-timeout"], input="", capture_output=True, timeout=3)
                        except subprocess.TimeoutExpired:
                            pass
                    flood["handshakes"] = attempts

                threads = [threading.Thread(target=flood_hellos),
                           threading.Thread(target=wrong_certificate_handshakes)]
                time.sleep(1)
                for t in threads:
                    t.start()
                out, err = producer.communicate(timeout=SECONDS + 60)
                stop.set()
                for t in threads:
                    t.join(timeout=60)
                self.assertEqual(producer.returncode, 0, err)
                sent = last_json(out)["frames_sent"]
                rx.wait_for(lambda: (lambda r: r if r["source"]["stream"] is None and
                                     r["source"]["streams_opened"] else None)(
                    rx.stats()["relay"]["receiver"]), timeout=30)
                receiver = rx.stats()["relay"]
                stream = rx.stream_stats("cam")
                self.assertEqual(rx.get("/healthz")[0], 200)
        print(f"\n  flood {flood}\n  receiver refused {receiver['refused']} keys "
              f"{receiver['keys']}", file=sys.stderr)
        # Every access unit arrived and was checked byte for byte, the flood notwithstanding.
        self.assertEqual(stream["frames_verified"], sent)
        self.assertEqual(stream["frames_verify_failed"], 0)
        self.assertEqual(receiver["receiver"]["frames_dropped"], 0)
        # The stranger's datagrams were refused and counted.
        refused = receiver["refused"]
        self.assertGreaterEqual(refused["foreign_datagrams"] + refused["srtp"] + refused["rtp"],
                                flood["garbage"] // 2)
        self.assertGreater(flood["hellos"], 1000)
        # No amplification: what a spoofable ClientHello draws back is never more than it.
        self.assertLessEqual(flood["answer_bytes"], flood["hello_bytes"])
        # The stranger tried full handshakes; none took the session from the peer.
        self.assertGreater(flood.get("handshakes", 0), 0)
        self.assertEqual(receiver["state"], "connected")


if __name__ == "__main__":
    unittest.main()
