#!/usr/bin/env python3
"""Writes synthetic.replay: the spec's v1 reference descriptor and 4 s of 25 Hz reports.

The head turns left to +40 deg yaw and back, nods to +15 deg pitch; the gyro field is all zero
(as one XM5 firmware reports), the discontinuity counter steps from 0 to 1 at t = 2 s, one report
carries the invalid raw value 0x8000 and one has another report ID. Deterministic: rerun to
regenerate byte-identical output.
"""
import math
import struct

V1_DESCRIPTOR = bytes([
    0x05, 0x20, 0x09, 0xE1, 0xA1, 0x01,
    0x85, 0x02,
    0x0A, 0x08, 0x03, 0x15, 0x00, 0x25, 0xFF, 0x75, 0x08, 0x95, 0x17, 0xB1, 0x03,
    0x0A, 0x02, 0x03, 0x15, 0x00, 0x25, 0xFF, 0x75, 0x08, 0x95, 0x10, 0xB1, 0x03,
    0x85, 0x01,
    0x0A, 0x16, 0x03, 0x15, 0x00, 0x25, 0x01, 0x75, 0x01, 0x95, 0x01,
    0xA1, 0x02, 0x0A, 0x40, 0x08, 0x0A, 0x41, 0x08, 0xB1, 0x00, 0xC0,
    0x0A, 0x19, 0x03, 0x15, 0x00, 0x25, 0x01, 0x75, 0x01, 0x95, 0x01,
    0xA1, 0x02, 0x0A, 0x55, 0x08, 0x0A, 0x51, 0x08, 0xB1, 0x00, 0xC0,
    0x0A, 0x0E, 0x03, 0x15, 0x00, 0x25, 0x3F, 0x35, 0x0A, 0x45, 0x64, 0x75, 0x06, 0x95, 0x01,
    0x66, 0x01, 0x10, 0x55, 0x0D, 0xB1, 0x02,
    0x0A, 0x44, 0x05, 0x16, 0x01, 0x80, 0x26, 0xFF, 0x7F,
    0x37, 0x60, 0x4F, 0x46, 0xED, 0x47, 0xA1, 0xB0, 0xB9, 0x12,
    0x55, 0x08, 0x75, 0x10, 0x95, 0x03, 0x81, 0x02,
    0x0A, 0x45, 0x05, 0x16, 0x01, 0x80, 0x26, 0xFF, 0x7F, 0x35, 0xE0, 0x45, 0x20,
    0x55, 0x00, 0x75, 0x10, 0x95, 0x03, 0x81, 0x02,
    0x0A, 0x46, 0x05, 0x15, 0x00, 0x25, 0xFF, 0x35, 0x00, 0x45, 0xFF,
    0x55, 0x00, 0x75, 0x08, 0x95, 0x01, 0x81, 0x02,
    0xC0,
])


def hexs(b):
    return " ".join(f"{x:02x}" for x in b)


def quat_mul(a, b):
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw)


def rotvec(yaw, pitch):
    q = quat_mul((math.cos(yaw / 2), 0, 0, math.sin(yaw / 2)),
                 (math.cos(pitch / 2), math.sin(pitch / 2), 0, 0))
    w = max(-1.0, min(1.0, q[0]))
    angle = 2 * math.acos(w)
    s = math.sqrt(max(0.0, 1 - w * w))
    if s < 1e-9:
        return (0.0, 0.0, 0.0)
    return tuple(c / s * angle for c in q[1:])


def raw_rot(v):
    # Inverse of v = (pmin + (raw - lmin) * (pmax - pmin) / (lmax - lmin)) * 1e-8.
    raw = round((v / 1e-8 + 314159264) * 65534 / 628318529 - 32767)
    return max(-32767, min(32767, raw))


def main():
    lines = ["# sync-headtrack replay v1: descriptor hex, optional feature lines, then "
             "'t_ms report_hex' lines",
             "# synthetic: 25 Hz, yaw to +40 deg and back, pitch +15 deg, gyro all zero, counter "
             "0 -> 1 at 2 s, one 0x8000 report, one other-ID report",
             hexs(V1_DESCRIPTOR),
             "feature 02 " + hexs(b"#AndroidHeadTracker#1.0" + bytes(16))]
    for i in range(100):
        t = i * 40
        s = t / 4000.0
        yaw = math.radians(40) * math.sin(math.pi * s)
        pitch = math.radians(15) * math.sin(2 * math.pi * s)
        r = [raw_rot(c) for c in rotvec(yaw, pitch)]
        counter = 0 if t < 2000 else 1
        report = struct.pack("<B3h3hB", 1, *r, 0, 0, 0, counter)
        if i == 30:
            report = report[:1] + b"\x00\x80" + report[3:]
        lines.append(f"{t} {hexs(report)}")
        if i == 50:
            lines.append(f"{t + 1} 03 00 01 02 03")
    with open("synthetic.replay", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
