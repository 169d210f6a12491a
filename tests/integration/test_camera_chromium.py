"""Chromium as a consumer of syncd's PipeWire camera, through xdg-desktop-portal's Camera portal
(docs/camera.md, "Chromium through the camera portal"). In a private PipeWire session
(pipewire_session.py), in this order:

1. syncd `--publisher camera`, and sync-producer sending I420 frames with `--camera-marker`
   (each frame's sequence drawn in columns, as camera_marker.py draws and reads them): the node
   "Sync Camera" appears with the stream;
2. Xvfb on a free display (-displayfd);
3. the portal's permission for host apps, set in xdg-permission-store (table "devices", id
   "camera", app id "": what xdg-desktop-portal 1.16 sees for an unsandboxed Chromium with no
   systemd user session), so no access dialog is asked for;
4. xdg-desktop-portal-gtk (the Access and Lockdown backend xdg-desktop-portal 1.16 proxies),
   then xdg-desktop-portal, after the node exists;
5. Chromium (Debian's, through playwright-core: tests/browser/lib/camera_consumer.js) under Xvfb
   with --enable-features=WebRtcPipeWireCamera: getUserMedia opens "Sync Camera"; the page
   reads each frame with requestVideoFrameCallback and decodes the marker from a canvas.

The CI run is 640x360 at 30 fps for 10 s. SYNC_CAMERA_LONG=1 adds 1080p60 for 60 s.
The colour test sends camera_colour.py's bars as RGBA instead (at 640x360, then 1280x720, in one
session) and the page reads each bar's centre back from a canvas (docs/camera.md, "Colour").
ProducerCameraMarker checks sync-producer's --camera-marker alone, through the camera's file
backend."""
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import camera_colour
import pipewire_session
from camera_marker import BITS, BLACK_Y, COLUMN, WHITE_Y, luma
from harness import PRODUCER, Syncd

HERE = os.path.dirname(os.path.abspath(__file__))
BROWSER_TESTS = os.path.normpath(os.path.join(HERE, "..", "browser"))
CONSUMER = os.path.join(BROWSER_TESTS, "lib", "camera_consumer.js")
CAMERA = "Sync Camera"  # syncd's default --camera-name, the label the page must see
PORTAL = "/usr/libexec/xdg-desktop-portal"
PORTAL_GTK = "/usr/libexec/xdg-desktop-portal-gtk"
PROGRAMS = ("Xvfb", "gdbus", "node", os.environ.get("CHROMIUM", "chromium"), PORTAL, PORTAL_GTK,
            "/usr/libexec/xdg-permission-store")


def camera_stats(syncd, name):
    s = syncd.stream_stats(name)
    return s["publishers"]["camera"] if s else None


def missing_parts():
    """What this test needs that the machine lacks (scripts/install-deps.sh installs it all)."""
    missing = pipewire_session.missing_binaries()
    missing += [p for p in PROGRAMS if shutil.which(p) is None]
    return missing


def gdbus(*args, timeout=10):
    """gdbus on the session's bus (DBUS_SESSION_BUS_ADDRESS is in os.environ while it runs)."""
    return subprocess.run(["gdbus", *args], capture_output=True, text=True, timeout=timeout)


def bus_has_name(name):
    p = gdbus("call", "--session", "--dest", "org.freedesktop.DBus", "--object-path",
              "/org/freedesktop/DBus", "--method", "org.freedesktop.DBus.NameHasOwner", name)
    return p.returncode == 0 and "true" in p.stdout


def wait_until(ready, what, timeout=15.0, proc=None, log=lambda: ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: exited with {proc.returncode}: {log()}")
        if ready():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what}: not ready after {timeout} s: {log()}")


class ChromiumCameraSession:
    """Xvfb, the portal's permission and the portal itself, added to a running PipeWireSession
    (its processes join the session's group, so the session's stop() ends them too)."""

    def __init__(self, session):
        self.session = session
        self.display = None
        self.timings = {}

    def start_xvfb(self):
        # -displayfd: Xvfb picks a free display itself and writes its number once it accepts
        # connections; no guessing of a free :N, no race with other tests' displays.
        read_end, write_end = os.pipe()
        try:
            t0 = time.monotonic()
            self.session.spawn("Xvfb", ["Xvfb", "-displayfd", str(write_end), "-screen", "0",
                                        "1280x800x24", "-nolisten", "tcp"], pass_fds=(write_end,))
            os.close(write_end)
            write_end = None
            number = b""
            while not number.endswith(b"\n"):
                ready, _, _ = select.select([read_end], [], [], 10)
                chunk = os.read(read_end, 16) if ready else b""
                if not chunk:
                    raise AssertionError(f"Xvfb gave no display: {self.session.log('Xvfb')}")
                number += chunk
        finally:
            os.close(read_end)
            if write_end is not None:
                os.close(write_end)
        self.display = f":{int(number)}"
        self.timings["xvfb_s"] = round(time.monotonic() - t0, 3)
        # For the portal backend (GTK) and Chromium, started from here on.
        self.session.env["DISPLAY"] = self.display
        os.environ["DISPLAY"] = self.display

    def grant_camera_to_host_apps(self):
        """xdg-desktop-portal 1.16 answers AccessCamera and OpenPipeWireRemote from the
        permission store (src/camera.c, device.c): table "devices", id "camera", the caller's
        app id. An unsandboxed Chromium without a systemd user scope has app id "" (xdp-utils.c,
        set_appid_from_pid), so "yes" for "" grants it without the access dialog, as the
        dialog's "Allow" would have stored it. The store is started by bus activation and keeps
        its database in the session's XDG_DATA_HOME."""
        p = gdbus("call", "--session", "--dest", "org.freedesktop.impl.portal.PermissionStore",
                  "--object-path", "/org/freedesktop/impl/portal/PermissionStore", "--method",
                  "org.freedesktop.impl.portal.PermissionStore.SetPermission", "devices", "true",
                  "camera", "", "['yes']")
        if p.returncode != 0:
            raise AssertionError(f"SetPermission: {p.stderr}")

    def start_portal(self):
        t0 = time.monotonic()
        # The backend first, with DISPLAY: xdg-desktop-portal 1.16 makes a proxy for its
        # Lockdown interface at start and, if the backend cannot start, calls through a NULL
        # proxy on AccessCamera and crashes (seen: SIGSEGV).
        gtk = self.session.spawn("xdg-desktop-portal-gtk", [PORTAL_GTK, "--replace"])
        wait_until(lambda: bus_has_name("org.freedesktop.impl.portal.desktop.gtk"),
                   "xdg-desktop-portal-gtk", proc=gtk,
                   log=lambda: self.session.log("xdg-desktop-portal-gtk"))
        portal = self.session.spawn("xdg-desktop-portal", [PORTAL, "--replace", "--verbose"])
        wait_until(lambda: self.camera_present() is not None, "xdg-desktop-portal", proc=portal,
                   log=lambda: self.session.log("xdg-desktop-portal"))
        self.timings["portal_s"] = round(time.monotonic() - t0, 3)

    def camera_present(self):
        """The Camera portal's IsCameraPresent, or None while the portal is not on the bus."""
        p = gdbus("call", "--session", "--dest", "org.freedesktop.portal.Desktop",
                  "--object-path", "/org/freedesktop/portal/desktop", "--method",
                  "org.freedesktop.DBus.Properties.Get", "org.freedesktop.portal.Camera",
                  "IsCameraPresent")
        if p.returncode != 0:
            return None
        return "true" in p.stdout

    def run_chromium(self, width, height, fps, seconds, readback="canvas", extra=()):
        """camera_consumer.js: Chromium opens the camera and counts frames for `seconds`. The
        page reads the middle row: row 0 starts with the 16-byte sequence marker. `extra`: more
        of its options (--sample)."""
        argv = ["node", CONSUMER, "--camera", CAMERA, "--width", str(width), "--height",
                str(height), "--fps", str(fps), "--seconds", str(seconds), "--row",
                str(height // 2), "--readback", readback, *extra]
        # In the session's process group: its stop() ends node and Chromium if they outlive a
        # failed test.
        p = self.session.spawn("camera_consumer", argv, cwd=BROWSER_TESTS, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        try:
            out, err = p.communicate(timeout=seconds + 120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise AssertionError(f"camera_consumer.js: no result within {seconds + 120} s")
        if p.returncode != 0:
            raise AssertionError(f"camera_consumer.js failed ({p.returncode}): {err[-4000:]}"
                                 f"\nportal: {self.session.log('xdg-desktop-portal', 2000)}")
        return json.loads(out.strip().splitlines()[-1])


@unittest.skipIf(missing_parts(), f"not installed: {' '.join(missing_parts())}")
class CameraInChromium(unittest.TestCase):
    def setUp(self):
        if not os.path.isdir(os.path.join(BROWSER_TESTS, "node_modules", "playwright-core")):
            self.fail("tests/browser/node_modules lacks playwright-core: run `npm ci` in "
                      "tests/browser (scripts/test.sh does)")
        self.session = pipewire_session.PipeWireSession()
        self.session.start()
        self.addCleanup(self.session.stop)
        saved_display = os.environ.get("DISPLAY")
        self.addCleanup(lambda: os.environ.__setitem__("DISPLAY", saved_display)
                        if saved_display is not None else os.environ.pop("DISPLAY", None))
        self.chromium = ChromiumCameraSession(self.session)

    def run_camera(self, width, height, fps, seconds, syncd_args=(), readback="canvas"):
        with Syncd("--publisher", "camera", *syncd_args) as syncd:
            self.assertIn(f'camera "{CAMERA}": pipewire', syncd.proc.stderr.readline())
            # sync-producer paces by the clock and never bursts to catch up; I420, so the Python
            # side has nothing to draw or mask (the camera repacks it into what Chromium takes).
            producer = subprocess.Popen(
                [PRODUCER, "--url", syncd.url, "--stream", "cam", "--width", str(width),
                 "--height", str(height), "--format", "i420", "--fps", str(fps), "--seconds",
                 str(seconds + 120), "--camera-marker", "--quiet"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                self.session.wait_for_node(CAMERA)
                # The portal looks for cameras when it starts: the node must exist first.
                self.chromium.start_xvfb()
                self.chromium.grant_camera_to_host_apps()
                self.chromium.start_portal()
                self.assertTrue(self.chromium.camera_present())
                before = camera_stats(syncd, "cam")
                r = self.chromium.run_chromium(width, height, fps, seconds, readback)
                after = camera_stats(syncd, "cam")
            finally:
                producer.terminate()
                out, err = producer.communicate(timeout=30)
        r["camera"] = after
        # What the camera did while Chromium was open (the counters also hold the start-up,
        # when no consumer held the node and every frame was backend_busy).
        r["camera_during"] = {k: after[k] - before[k] for k in ("offered", "delivered")}
        r["camera_during"]["dropped"] = {k: after["dropped"][k] - before["dropped"][k]
                                         for k in after["dropped"]}
        r["producer"] = json.loads(out.strip().splitlines()[-1]) if out.strip() else err[-500:]
        r["timings"] = self.chromium.timings
        print(f"{width}x{height}@{fps} {seconds} s:",
              json.dumps({k: v for k, v in r.items() if k not in ("logs", "settings", "camera")}),
              file=sys.stderr)
        return r

    def check(self, r, width, height, min_unique_fps):
        self.assertNotIn("error", r, r)
        self.assertNotIn("timed_out", r, r)
        self.assertEqual(r["label"], CAMERA, r)
        self.assertEqual((r["settings"]["width"], r["settings"]["height"]), (width, height), r)
        self.assertEqual(r["sizes"], {f"{width}x{height}": r["frames"]}, r)
        self.assertEqual(r["corrupt"], 0, r)
        self.assertGreaterEqual(r["unique_fps"], min_unique_fps, r)
        self.assertEqual(r["camera"]["backend"], "pipewire", r["camera"])

    def test_getusermedia_opens_sync_camera_and_sees_every_frame_marked(self):
        # 640x360 at 30 fps for 10 s: small enough for CI's 2 shared cores.
        r = self.run_camera(640, 360, 30, 10)
        self.check(r, 640, 360, min_unique_fps=25)
        self.assertEqual(r["settings"]["frameRate"], 30, r)

    @unittest.skipUnless(os.environ.get("SYNC_CAMERA_LONG"),
                         "opt-in: SYNC_CAMERA_LONG=1 runs 1080p60 for 60 s")
    def test_1080p60_for_60_s(self):
        # I420 first, so Chromium takes the producer's frames unconverted. The marker is read
        # from a VideoFrame (SYNC_CAMERA_READBACK=canvas for the canvas): a canvas readback
        # converts the whole 1080p frame on the page's thread, and the page then sees about 12
        # of Chromium's 50-60 frames a second on these 2 cores (docs/camera.md).
        r = self.run_camera(1920, 1080, 60, float(os.environ.get("SYNC_CAMERA_SECONDS", 60)),
                            syncd_args=("--camera-format", "i420"),
                            readback=os.environ.get("SYNC_CAMERA_READBACK", "videoframe"))
        self.check(r, 1920, 1080, min_unique_fps=50)

    def test_colour_bars_come_back_as_sent_at_360p_and_720p(self):
        # camera_colour.py's nine bars, sent as RGBA: the camera converts them to BT.601
        # limited-range YUV at every size (docs/camera.md, "Colour"). Chromium passes no colour
        # space with a PipeWire frame; drawn into a canvas (software, --disable-gpu) it converts
        # such YUV as BT.601. The page reads each bar's centre, averaged over 8x8 pixels (away
        # from the bar's edges, where chroma is shared with a neighbour), as RGB from the canvas
        # and as the frame's own Y, U, V (a VideoFrame of it). Asserted, at 640x360 and at
        # 1280x720 (where GStreamer's default would be BT.709): Chromium's RGB within 3 levels
        # of the exact BT.601 limited-range inverse of the YUV it got (Chromium's share: a
        # BT.709 reading is up to 40 off), then within 3 of the RGB sent (the camera's RGB to
        # YUV rounding and Chromium's fixed-point YUV to RGB together; see below). One
        # session: the 720p stream opens once the 360p one has closed and its node has gone,
        # and a second Chromium opens it. No marker count (--seconds 0): the page waits 1 s,
        # then samples 3 frames.
        sizes, results = ((640, 360), (1280, 720)), {}
        with Syncd("--publisher", "camera") as syncd:
            self.assertIn(f'camera "{CAMERA}": pipewire', syncd.proc.stderr.readline())
            for width, height in sizes:
                points = ";".join(f"{x},{y}" for x, y in camera_colour.bar_centres(width, height))
                with camera_colour.BarsProducer(syncd.url, f"bars{width}", width, height,
                                                fps=10):
                    self.session.wait_for_node(CAMERA)
                    if self.chromium.display is None:
                        # The portal looks for cameras when it starts: the node must exist.
                        self.chromium.start_xvfb()
                        self.chromium.grant_camera_to_host_apps()
                        self.chromium.start_portal()
                        self.assertTrue(self.chromium.camera_present())
                    r = self.chromium.run_chromium(width, height, 10, 0, extra=(
                        "--sample", points, "--patch", "8", "--sample-frames", "3"))
                    r["camera"] = camera_stats(syncd, f"bars{width}")
                results[(width, height)] = r
                # The stream closed with its producer: the node goes, and the next stream's
                # node (at its own size) takes its place.
                self.session.wait_for_node(CAMERA, present=False)
        for (width, height), r in results.items():
            with self.subTest(size=f"{width}x{height}"):
                self.assertNotIn("error", r, r)
                self.assertNotIn("sample_error", r, r)
                self.assertIsNotNone(r.get("sample_yuv"), r.get("sample_info"))
                # Per bar: sent RGB, Chromium's RGB, the YUV it got, BT.601's YUV for the sent
                # RGB, and the exact BT.601 inverse of the YUV it got.
                bars = [{"bar": bar, "sent": sent, "chromium": got, "yuv": yuv,
                         "bt601_yuv": [round(v, 2) for v in bt601_limited_yuv(*sent)],
                         "bt601_rgb": [round(v, 2) for v in bt601_limited_rgb(*yuv)]}
                        for (bar, sent), got, yuv in zip(camera_colour.BARS, r["samples"],
                                                         r["sample_yuv"])]
                worst = camera_colour.worst_error(r["samples"])
                chromium_worst = max(abs(g - e) for b in bars
                                     for g, e in zip(b["chromium"], b["bt601_rgb"]))
                print(f"{width}x{height} colour bars: worst {worst} from the RGB sent, "
                      f"{chromium_worst:.2f} from BT.601 of the YUV Chromium got;",
                      json.dumps({"bars": bars, **{k: r.get(k) for k in (
                          "sample_range", "sample_info", "launch_to_result_s")}}),
                      file=sys.stderr)
                self.assertEqual(r["label"], CAMERA, r)
                self.assertEqual((r["settings"]["width"], r["settings"]["height"]),
                                 (width, height), r)
                self.assertEqual(r["sample_info"]["size"], f"{width}x{height}", r)
                self.assertEqual(r["camera"]["backend"], "pipewire", r["camera"])
                for b in bars:
                    self.assertLessEqual(
                        max(abs(g - e) for g, e in zip(b["chromium"], b["bt601_rgb"])), 3,
                        ("Chromium did not read the camera's YUV as BT.601 limited range", b,
                         r["sample_info"]))
                # Against the RGB sent: within 3. Measured worst 2 at both sizes (blue sent
                # 0,0,255 shown 0,0,253): the camera's YUV is within half a level of the exact
                # matrix (rgb_to_yuv.h), and Chromium's fixed-point YUV to RGB takes the rest.
                # With libyuv's truncating conversion blue came back as 251.
                for b in bars:
                    self.assertLessEqual(
                        max(abs(g - s) for g, s in zip(b["chromium"], b["sent"])), 3, b)


def bt601_limited_yuv(r, g, b):
    """Y, U, V (unrounded) of an 8-bit sRGB colour in BT.601 limited range."""
    return (16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255,
            128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255,
            128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255)


def bt601_limited_rgb(y, u, v):
    """The exact inverse: R, G, B (unrounded, clamped to 0-255) of BT.601 limited-range YUV."""
    y, u, v = (y - 16) * 255 / 219, (u - 128) * 255 / 224, (v - 128) * 255 / 224
    return tuple(min(255.0, max(0.0, c)) for c in (
        y + 1.402 * v, y - 0.344136 * u - 0.714136 * v, y + 1.772 * u))


class ProducerCameraMarker(unittest.TestCase):
    """sync-producer --camera-marker draws what camera_marker.py reads, in every source format,
    through the camera's conversion: checked on the v4l2loopback backend with a file for the
    device (test_camera.py's way), so without PipeWire or Chromium."""

    W, H, FRAMES = 320, 48, 12

    def test_every_frame_carries_its_sequence_in_columns(self):
        size = self.W * self.H * 3 // 2  # I420
        for source in ("i420", "nv12", "rgba8", "bgra8"):
            with self.subTest(source=source), tempfile.TemporaryDirectory() as tmp:
                device = os.path.join(tmp, "video10")
                open(device, "wb").close()
                with Syncd("--publisher", "camera", "--camera-device", device,
                           "--camera-format", "i420") as syncd:
                    p = subprocess.run(
                        [PRODUCER, "--url", syncd.url, "--stream", "cam", "--width", str(self.W),
                         "--height", str(self.H), "--format", source, "--fps", "20",
                         "--frames", str(self.FRAMES), "--camera-marker", "--quiet"],
                        capture_output=True, text=True, timeout=60)
                    self.assertEqual(p.returncode, 0, p.stderr)
                    cam = syncd.wait_for(lambda: (lambda c: c if c and c["offered"] == self.FRAMES
                                                  and c["converting"] == 0 else None)(
                        camera_stats(syncd, "cam")))
                    self.assertEqual(syncd.stop(), 0)
                with open(device, "rb") as f:
                    data = f.read()
                self.assertEqual(len(data), cam["delivered"] * size, cam)
                self.assertGreaterEqual(cam["delivered"], self.FRAMES - 2, cam)
                sequences = []
                for i in range(cam["delivered"]):
                    frame = data[i * size:(i + 1) * size]
                    # Row 0 starts with the 16-byte sequence marker; every other row has only
                    # the columns: each within 2 of BT.601's black or white, the guard black.
                    rows = []
                    for y in (1, self.H // 2, self.H - 1):
                        seq = 0
                        for bit in range(BITS + 1):
                            v = luma(frame, "i420", bit * COLUMN + COLUMN // 2, y, self.W)
                            if bit < BITS and abs(v - WHITE_Y) <= 2:
                                seq |= 1 << bit
                            else:
                                self.assertLessEqual(abs(v - BLACK_Y), 2, (source, i, y, bit, v))
                        rows.append(seq)
                    self.assertEqual(len(set(rows)), 1, (source, i, rows))
                    sequences.append(rows[0])
                # In order and distinct (a frame the camera dropped leaves a gap, never a
                # repeat); the producer counts from 0 or 1.
                self.assertEqual(sequences, sorted(set(sequences)), (source, sequences))
                self.assertLessEqual(sequences[0], 1, sequences)


if __name__ == "__main__":
    unittest.main()
