"""WHEP interop with GStreamer's webrtcbin (docs/whep.md, "Interop"): a WebRTC stack that is
neither Chromium's nor werift's (libnice's ICE, the dtls and srtp elements' DTLS-SRTP, rtpbin)
plays a syncd stream the way a native WHEP player does. sync-producer publishes 640x360 I420 at
60 fps with the column marker (camera_marker.py) and hands out a ticket (--ticket-file); the test
builds webrtcbin with a recvonly H.264 transceiver, POSTs its offer with the ticket as the bearer
token, sets syncd's answer, and decodes what arrives (rtph264depay ! h264parse ! openh264dec or
avdec_h264 ! appsink), reading the marker of every decoded frame.

What GStreamer 1.22 (Debian 12) reaches against syncd, each step asserted:
- an offer whose H.264 has no packetization-mode=1 (webrtcbin's, from caps without the field) is
  refused: 400 `bad offer: no_h264`; with the field, 201 and an answer webrtcbin takes;
- ICE: libnice (the controlling, full agent) against syncd's ICE-lite completes, its checks
  authenticated (`stun_requests`, no `stun_refused`). syncd listens on the address libnice
  gathers (`--host`): libnice gathers no loopback candidate on a host with another interface and
  sends each check out of its candidate's interface (IP_UNICAST_IF), so it never reaches a
  127.0.0.1 candidate;
- DTLS: the handshake runs and webrtcbin holds syncd's certificate, the one the answer's
  a=fingerprint names;
- SRTP: GStreamer 1.22's DTLS offers only SRTP_AES128_CM_SHA1_80 in use_srtp; syncd's WebRTC
  sessions take it from a peer without GCM (secure/webrtc_srtp.h, libsrtp2), and /stats says so
  (`whep.sessions[].srtp`);
- frames: at least 0.8 x 60 fps decoded after the first, every marker readable and strictly
  increasing, the session connected with frames sent, and a DELETE of the Location ending it.
test_the_decode_branch_reads_markers checks the decode branch alone (openh264enc's H.264
through RTP into the same decoder and marker reader).

Run: cd tests/integration && SYNCD=... SYNC_PRODUCER=... python3 -m unittest -v test_whep_webrtcbin
"""
import hashlib
import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

from camera_marker import BITS, BLACK_Y, COLUMN, WHITE_Y, marker_frame
from harness import PRODUCER, Syncd

try:
    import gi
    gi.require_version("Gst", "1.0")
    gi.require_version("GstSdp", "1.0")
    gi.require_version("GstVideo", "1.0")
    gi.require_version("GstWebRTC", "1.0")
    from gi.repository import Gst, GstSdp, GstVideo, GstWebRTC
    Gst.init(None)
    MISSING = [e for e in ("webrtcbin", "nicesrc", "dtlssrtpdec", "srtpdec", "rtph264depay",
                           "h264parse", "videoconvert", "appsink")
               if Gst.ElementFactory.find(e) is None]
    DECODER = next((d for d in ("avdec_h264", "openh264dec") if Gst.ElementFactory.find(d)), None)
    if DECODER is None:
        MISSING.append("avdec_h264 or openh264dec")
except (ImportError, ValueError) as e:  # no python3-gi, or a typelib missing
    MISSING = [str(e)]
    DECODER = None

SKIP_REASON = ("GStreamer WebRTC parts missing (" + ", ".join(MISSING) + "): apt-get install "
               "gstreamer1.0-nice gstreamer1.0-plugins-bad gir1.2-gst-plugins-bad-1.0")

W, H, FPS = 640, 360, 60
STREAM = "cam"
PLAY_SECONDS = 8
# The transceiver's caps become the offer's m-line: without packetization-mode=1 in them the
# offer has no fmtp and syncd refuses it (docs/whep.md, "The endpoint": no_h264).
H264_CAPS = ("application/x-rtp,media=video,encoding-name=H264,payload=96,clock-rate=90000,"
             "packetization-mode=(string)1,profile-level-id=(string)42e01f,"
             "level-asymmetry-allowed=(string)1")
BARE_CAPS = "application/x-rtp,media=video,encoding-name=H264,payload=96,clock-rate=90000"
# A decoded column within this of BT.601 black or white reads as a bit; anything between is a
# damaged frame. Compression moves flat 8-pixel columns by a few levels at most.
TOLERANCE = 40


def read_marker(buf, info, rows):
    """The column marker of a decoded I420 frame, read from the luma of each of rows (not row 0:
    the 16-byte sequence marker is there), or None when a column is neither clearly black nor
    clearly white, the guard column after the marker is not black, or the rows disagree."""
    width = (BITS + 1) * COLUMN
    found = set()
    for y in rows:
        row = buf.extract_dup(info.offset[0] + y * info.stride[0], width)
        sequence = 0
        for bit in range(BITS + 1):
            v = row[bit * COLUMN + COLUMN // 2]
            if abs(v - BLACK_Y) <= TOLERANCE:
                continue
            if bit < BITS and abs(v - WHITE_Y) <= TOLERANCE:
                sequence |= 1 << bit
                continue
            return None
        found.add(sequence)
    return found.pop() if len(found) == 1 else None


class FrameLog:
    """Decoded frames as (arrival, marker or None), from the appsink's streaming thread."""

    def __init__(self):
        self.lock = threading.Lock()
        self.frames = []
        self.sizes = set()

    def on_sample(self, sink):
        sample = sink.emit("pull-sample")
        if sample is None:
            return Gst.FlowReturn.EOS
        info = GstVideo.VideoInfo.new_from_caps(sample.get_caps())
        marker = read_marker(sample.get_buffer(), info,
                             (info.height // 4, info.height // 2, 3 * info.height // 4))
        with self.lock:
            self.sizes.add((info.width, info.height))
            self.frames.append((time.monotonic(), marker))
        return Gst.FlowReturn.OK

    def snapshot(self):
        with self.lock:
            return list(self.frames)

    def summary(self, fps=FPS):
        """Counts and rates over the window from the first decoded frame to the last."""
        frames = self.snapshot()
        markers = [m for _, m in frames if m is not None]
        span = frames[-1][0] - frames[0][0] if len(frames) > 1 else 0.0
        steps = [b - a for a, b in zip(markers, markers[1:])]
        return {
            "decoded": len(frames),
            "seconds": round(span, 3),
            "fps": round((len(frames) - 1) / span, 2) if span > 0 else 0.0,
            "unreadable": len(frames) - len(markers),
            "not_increasing": sum(1 for s in steps if s <= 0),
            "missing": sum(s - 1 for s in steps if s > 1),
            "first_marker": markers[0] if markers else None,
            "last_marker": markers[-1] if markers else None,
            "sizes": sorted(self.sizes),
            "expected_at_fps": round(fps * span, 1),
        }


def decode_branch(log):
    """rtph264depay ! h264parse ! decoder ! videoconvert ! I420 ! appsink, as one bin with a
    ghost sink pad; every decoded frame goes to log."""
    branch = Gst.parse_bin_from_description(
        f"rtph264depay ! h264parse ! {DECODER} ! videoconvert ! video/x-raw,format=I420 ! "
        "appsink name=frames emit-signals=true sync=false max-buffers=16 drop=false", True)
    branch.get_by_name("frames").connect("new-sample", log.on_sample)
    return branch


class Player:
    """webrtcbin as a WHEP player: max-bundle, one recvonly H.264 transceiver; a pad it adds
    (the remote video) is decoded into self.log. Bus errors and warnings are kept, never acted
    on; every wait has a deadline."""

    def __init__(self, caps=H264_CAPS):
        self.log = FrameLog()
        self.bus_messages = []  # (type, element name, message and debug text)
        self.pipeline = Gst.Pipeline.new("whep-player")
        self.webrtc = Gst.ElementFactory.make("webrtcbin", "webrtc")
        self.webrtc.set_property("bundle-policy", GstWebRTC.WebRTCBundlePolicy.MAX_BUNDLE)
        self.pipeline.add(self.webrtc)
        self.webrtc.connect("pad-added", self._on_pad_added)
        self.transceiver = self.webrtc.emit(
            "add-transceiver", GstWebRTC.WebRTCRTPTransceiverDirection.RECVONLY,
            Gst.Caps.from_string(caps))
        self.pipeline.get_bus().set_sync_handler(self._on_bus_message)
        if self.pipeline.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
            raise AssertionError("webrtcbin did not start")

    def _on_bus_message(self, bus, message):
        if message.type in (Gst.MessageType.ERROR, Gst.MessageType.WARNING):
            parsed = (message.parse_error() if message.type == Gst.MessageType.ERROR
                      else message.parse_warning())
            self.bus_messages.append((message.type.first_value_nick,
                                      message.src.get_name() if message.src else "?",
                                      f"{parsed[0].message} ({parsed[1]})"))
        return Gst.BusSyncReply.DROP

    def _on_pad_added(self, element, pad):
        if pad.get_direction() != Gst.PadDirection.SRC:
            return
        branch = decode_branch(self.log)
        self.pipeline.add(branch)
        branch.sync_state_with_parent()
        pad.link(branch.get_static_pad("sink"))

    def _call(self, signal, argument, timeout=10):
        done = threading.Event()
        promise = Gst.Promise.new_with_change_func(lambda _: done.set())
        self.webrtc.emit(signal, argument, promise)
        if not done.wait(timeout):
            raise AssertionError(f"webrtcbin {signal}: no reply in {timeout} s")
        reply = promise.get_reply()
        if reply is not None and reply.has_field("error"):
            raise AssertionError(f"webrtcbin {signal}: {reply.to_string()}")
        return reply

    def offer(self, timeout=10):
        """The local offer with every candidate gathered (syncd takes no trickle)."""
        reply = self._call("create-offer", None)
        offer = reply.get_value("offer")
        self._call("set-local-description", offer)
        deadline = time.monotonic() + timeout
        while (self.webrtc.get_property("ice-gathering-state")
               != GstWebRTC.WebRTCICEGatheringState.COMPLETE):
            if time.monotonic() > deadline:
                raise AssertionError("ICE gathering did not complete")
            time.sleep(0.02)
        return self.webrtc.get_property("local-description").sdp.as_text()

    def set_answer(self, text):
        result, message = GstSdp.SDPMessage.new_from_text(text)
        if result != GstSdp.SDPResult.OK:
            raise AssertionError(f"webrtcbin cannot parse the answer ({result}): {text}")
        self._call("set-remote-description", GstWebRTC.WebRTCSessionDescription.new(
            GstWebRTC.WebRTCSDPType.ANSWER, message))

    @property
    def ice_state(self):
        return self.webrtc.get_property("ice-connection-state").value_nick

    @property
    def dtls(self):
        return self.transceiver.get_property("receiver").get_property("transport")

    def stop(self):
        self.pipeline.set_state(Gst.State.NULL)
        self.pipeline.get_state(5 * Gst.SECOND)
        self.pipeline.get_bus().set_sync_handler(None)


def offer_addresses(sdp):
    """The IPv4 addresses of an offer's UDP host candidates, in its order."""
    return [m.group(1) for m in re.finditer(
        r"^a=candidate:\S+ 1 udp \d+ (\d+\.\d+\.\d+\.\d+) \d+ typ host", sdp, re.M | re.I)]


def sha256_fingerprint(pem):
    digest = hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest().upper()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


class HostSyncd(Syncd):
    """syncd on one address (its --host), which its WHEP answer names as the candidate."""

    def __init__(self, host, *args):
        super().__init__("--host", host, *args)
        self.host = host

    @property
    def url(self):
        return f"ws://{self.host}:{self.port}/ws"

    def request(self, method, path, body=None, headers=None):
        req = urllib.request.Request(f"http://{self.host}:{self.port}{path}", data=body,
                                     method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, dict(r.headers), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read().decode()

    def get(self, path):
        status, _, body = self.request("GET", path)
        return status, body

    def whep(self):
        return self.stats()["whep"]


@unittest.skipIf(MISSING, SKIP_REASON)
class WhepWebrtcbin(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # The address libnice gathers is the one syncd must answer with (see the docstring).
        player = Player()
        try:
            addresses = offer_addresses(player.offer())
        finally:
            player.stop()
        if not addresses:
            raise unittest.SkipTest("libnice gathered no IPv4 host candidate")
        cls.host = next((a for a in addresses if not a.startswith("127.")), addresses[0])

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.syncd = HostSyncd(self.host).__enter__()
        self.addCleanup(self.syncd.__exit__, None, None, None)
        ticket_file = os.path.join(tmp.name, "ticket")
        self.producer_log = open(os.path.join(tmp.name, "producer.log"), "w+")
        self.addCleanup(self.producer_log.close)
        # Paced by the clock; 4 uses: each POST spends one. It runs until the test stops it.
        self.producer = subprocess.Popen(
            [PRODUCER, "--url", self.syncd.url, "--stream", STREAM, "--width", str(W), "--height",
             str(H), "--format", "i420", "--fps", str(FPS), "--seconds", "300", "--camera-marker",
             "--ticket-file", ticket_file, "--ticket-uses", "4", "--quiet"],
            stdout=subprocess.DEVNULL, stderr=self.producer_log)
        self.addCleanup(self._stop_producer)
        def read_ticket():
            if not os.path.exists(ticket_file):
                return None
            with open(ticket_file) as f:
                return f.read().strip()
        ticket = self.syncd.wait_for(read_ticket, timeout=20)
        self.assertRegex(ticket, r"^[0-9a-f]{32}$")
        self.ticket = ticket

    def _stop_producer(self):
        if self.producer.poll() is None:
            self.producer.terminate()
            try:
                self.producer.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.producer.kill()
                self.producer.wait()

    def player(self, caps=H264_CAPS):
        p = Player(caps)
        self.addCleanup(p.stop)  # before syncd's and the producer's cleanups run
        return p

    def post(self, offer):
        return self.syncd.request("POST", f"/whep/{STREAM}", offer.encode(), {
            "Content-Type": "application/sdp", "Authorization": f"Bearer {self.ticket}"})

    def test_an_offer_without_packetization_mode_is_refused(self):
        status, _, body = self.post(self.player(BARE_CAPS).offer())
        self.assertEqual(status, 400, body)
        self.assertEqual(body.strip(), "bad offer: no_h264")
        self.assertEqual(self.syncd.whep()["refused"]["no_h264"], 1)

    def test_webrtcbin_plays_the_stream(self):
        player = self.player()
        offer = player.offer()
        self.assertIn("a=fmtp:96 packetization-mode=1", offer)
        status, headers, answer = self.post(offer)
        self.assertEqual(status, 201, answer)
        location = headers.get("Location")
        self.assertRegex(location or "", rf"^/whep/{STREAM}/[0-9a-f]{{16}}$")
        self.assertIn("a=ice-lite", answer)
        self.assertIn("a=setup:passive", answer)
        self.assertRegex(answer, rf"a=candidate:\S+ 1 udp \d+ {re.escape(self.host)} \d+ typ host")
        fingerprint = re.search(r"^a=fingerprint:sha-256 (\S+)", answer, re.M).group(1)
        player.set_answer(answer)

        # Until the first decoded frame, or an error from webrtcbin; syncd's session meanwhile
        # (when the session fails, it lives for a few tens of ms: it may never be seen).
        session = None
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            s = [x for x in self.syncd.whep()["sessions"] if x["stream"] == STREAM]
            session = s[0] if s else session
            if player.log.snapshot() or any(t == "error" for t, _, _ in player.bus_messages):
                break
            time.sleep(0.01)
        egress = self.syncd.whep()["egresses"][0]
        dtls_state = player.dtls.get_property("state").value_nick
        print(f"\n  webrtcbin: ice {player.ice_state}, dtls {dtls_state}, bus {player.bus_messages}"
              f"\n  syncd session (last seen) {json.dumps(session)}\n  "
              f"egress {json.dumps({k: v for k, v in egress.items() if k != 'publisher'})}",
              file=sys.stderr)

        # ICE: libnice's checks reached syncd's ICE-lite and were answered, signed with the
        # answer's password (libnice takes no other response), so the pair completed.
        self.assertIn(player.ice_state, ("connected", "completed"))
        self.assertEqual((egress["sessions_started"], egress["stun_unknown_user"]), (1, 0), egress)
        if session is not None and session["state"] != "waiting_for_ice":
            self.assertGreaterEqual(session["stun_requests"], 1, session)
            self.assertEqual(session["stun_refused"], 0, session)
        # DTLS: webrtcbin holds syncd's certificate, the one the answer named.
        pem = player.dtls.get_property("remote-certificate")
        self.assertTrue(pem, "webrtcbin got no certificate from syncd")
        self.assertEqual(sha256_fingerprint(pem), fingerprint)

        errors = [text for t, _, text in player.bus_messages if t == "error"]
        self.assertEqual(errors, [], player.bus_messages)
        self.check_frames(player, location)

    def check_frames(self, player, location):
        # Decode for PLAY_SECONDS after the first frame (deadline: well past it).
        first = player.log.snapshot()[0][0] if player.log.snapshot() else None
        self.assertIsNotNone(first, f"no frame decoded in 15 s: {player.bus_messages}")
        while time.monotonic() < first + PLAY_SECONDS:
            time.sleep(0.1)
        s = [x for x in self.syncd.whep()["sessions"] if x["stream"] == STREAM]
        self.assertEqual(len(s), 1)
        session = s[0]
        self.assertGreaterEqual(session["stun_requests"], 1, session)
        self.assertEqual(session["stun_refused"], 0, session)
        r = player.log.summary()
        print(f"  webrtcbin decoded {json.dumps(r)}\n  syncd session {json.dumps(session)}",
              file=sys.stderr)
        self.assertEqual(session["state"], "connected", session)
        # GStreamer's DTLS offers only AES-CM: the profile syncd takes from a peer without GCM.
        self.assertEqual(session["srtp"], "aes128_cm_sha1_80", session)
        # libnice's keepalives are Binding indications: ignored, not taken for malformed STUN.
        egress = self.syncd.whep()["egresses"][0]
        self.assertEqual(egress["stun_malformed"], 0, egress)
        self.assertGreater(session["frames_sent"], 0, session)
        self.assertEqual(r["sizes"], [(W, H)], r)
        # Every decoded frame carries a readable marker, each later than the one before.
        self.assertEqual(r["unreadable"], 0, r)
        self.assertEqual(r["not_increasing"], 0, r)
        # The rate webrtcbin decoded, against the source's 60 fps on the wall clock.
        self.assertGreaterEqual(r["decoded"], 0.8 * FPS * r["seconds"], r)
        self.assertLessEqual(r["missing"], 0.2 * FPS * r["seconds"], r)
        # DELETE ends the session: 200, then it leaves /stats (its frames counted as ended).
        status, _, body = self.syncd.request("DELETE", location)
        self.assertEqual(status, 200, body)
        whep = self.syncd.wait_for(lambda: (lambda w: w if all(
            x["state"] == "ended" for x in w["sessions"]) else None)(self.syncd.whep()),
            timeout=5)
        self.assertEqual(whep["deleted"], 1, whep)
        self.syncd.wait_for(lambda: self.syncd.whep()["ended_sessions_frames_sent"]
                            >= session["frames_sent"], timeout=5)


@unittest.skipIf(MISSING, SKIP_REASON)
class DecodeBranch(unittest.TestCase):
    """The player's decode branch and marker reader on their own, without syncd: I420 frames
    with the column marker, encoded by openh264enc and carried as RTP (rtph264pay), decoded and
    read back. Keeps the frame checks above known to work while no frame reaches them."""

    def test_the_decode_branch_reads_markers(self):
        if Gst.ElementFactory.find("openh264enc") is None:
            self.skipTest("no openh264enc")
        frames = 30
        pipeline = Gst.parse_launch(
            f"appsrc name=src format=time caps=video/x-raw,format=I420,width={W},height={H},"
            f"framerate={FPS}/1 ! openh264enc bitrate=4000000 ! h264parse ! "
            "rtph264pay pt=96 config-interval=-1 name=pay")
        log = FrameLog()
        branch = decode_branch(log)
        pipeline.add(branch)
        self.assertTrue(pipeline.get_by_name("pay").link(branch))
        self.addCleanup(pipeline.set_state, Gst.State.NULL)
        pipeline.set_state(Gst.State.PLAYING)
        src = pipeline.get_by_name("src")
        for i in range(frames):
            buf = Gst.Buffer.new_wrapped(marker_frame("i420", 1000 + i, W, H))
            buf.pts = i * Gst.SECOND // FPS
            buf.duration = Gst.SECOND // FPS
            src.emit("push-buffer", buf)
        src.emit("end-of-stream")
        msg = pipeline.get_bus().timed_pop_filtered(
            20 * Gst.SECOND, Gst.MessageType.EOS | Gst.MessageType.ERROR)
        self.assertIsNotNone(msg, "the pipeline did not finish in 20 s")
        self.assertEqual(msg.type, Gst.MessageType.EOS, msg.parse_error() if msg.type ==
                         Gst.MessageType.ERROR else msg)
        r = log.summary()
        self.assertEqual(r["decoded"], frames, r)
        self.assertEqual((r["unreadable"], r["not_increasing"], r["missing"]), (0, 0, 0), r)
        self.assertEqual((r["first_marker"], r["last_marker"]), (1000, 1000 + frames - 1), r)
        self.assertEqual(r["sizes"], [(W, H)], r)


if __name__ == "__main__":
    unittest.main()
