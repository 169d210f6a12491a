"""syncd's exit status end to end (README.md, "Exit status"): 0 for --help, 2 for any command line
it refuses, whichever check refuses it, 1 when the command line was accepted but syncd could not
start. The parsing itself is unit-tested (tests/unit/daemon/daemon_options_test.cpp); this checks what
main() prints and returns."""
import os
import subprocess
import tempfile
import unittest

from harness import SYNCD, Syncd

USAGE, START_FAILED = 2, 1


def run(*args):
    return subprocess.run([SYNCD, "--port", "0", "--status-line", "off", *args],
                          capture_output=True, text=True, timeout=30)


class ExitStatus(unittest.TestCase):
    def test_help_goes_to_stdout_with_status_0(self):
        p = run("--help")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("Usage:", p.stdout)
        self.assertIn("--relay-audio-target-ms", p.stdout)
        self.assertEqual(p.stderr, "")

    def test_every_kind_of_refusal_is_a_usage_error(self):
        for args, says in ((["--bogus"], "--bogus"),                       # unknown option
                           (["stray"], "stray"),                           # stray argument
                           (["--max-connections", "many"], "--max-connections"),  # not a number
                           (["--shm-slots", "65"], "not in range"),        # out of range
                           (["--status-line", "maybe"], "--status-line"),  # not a choice
                           (["--publisher", "bogus"], "unknown publisher 'bogus'"),
                           (["--source", "noise"], "unknown source"),
                           (["--whip-to", "http://127.0.0.1:9/", "--no-whep"], "--no-whep"),
                           (["--whip-to", "ftp://127.0.0.1/whip"], "--whip-to"),
                           (["--whep-audio-channels", "0,1"], "needs an --audio-source"),
                           (["--relay-listen", "70000", "--peer-fingerprint", "AB"],
                            "--peer-fingerprint")):
            with self.subTest(args=args):
                p = run(*args)
                self.assertEqual(p.returncode, USAGE, p.stderr)
                self.assertIn(says, p.stderr)
                self.assertEqual(p.stdout, "")

    def test_an_address_in_use_is_a_failure_to_start(self):
        with Syncd() as first:
            p = subprocess.run([SYNCD, "--port", str(first.port), "--status-line", "off"],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, START_FAILED, p.stderr)
            self.assertIn("cannot start on 127.0.0.1:%d" % first.port, p.stderr)

    def test_a_host_that_is_no_address_is_a_failure_to_start(self):
        p = run("--host", "256.1.1.1")
        self.assertEqual(p.returncode, START_FAILED, p.stderr)
        self.assertIn("cannot start on 256.1.1.1", p.stderr)

    def test_an_unusable_relay_certificate_is_a_failure_to_start(self):
        with tempfile.TemporaryDirectory() as tmp:
            p = run("--print-fingerprint", "--relay-cert", os.path.join(tmp, "no", "id.pem"))
            self.assertEqual(p.returncode, START_FAILED, p.stderr)
            self.assertIn("id.pem", p.stderr)
            cert = os.path.join(tmp, "id.pem")
            p = run("--print-fingerprint", "--relay-cert", cert)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue(p.stdout.startswith("sha-256 "), p.stdout)


if __name__ == "__main__":
    unittest.main()
