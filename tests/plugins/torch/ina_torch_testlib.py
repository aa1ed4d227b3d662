"""Shared pieces of the ina_torch tests: a real ina-switchd on a free loopback port, free ports,
seeds. The switch binary comes from INA_SWITCHD_BIN (set by ctest)."""
import contextlib
import os
import socket
import subprocess
import threading
import time

SWITCHD = os.environ.get("INA_SWITCHD_BIN", "build/bin/ina-switchd")


def seed():
    s = int(os.environ.get("INA_SEED", "7"))
    print(f"seed {s} (INA_SEED=<n> replays)", flush=True)
    return s


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Switch:
    """ina-switchd on 127.0.0.1 with an ephemeral UDP port; kill() stops it at once (SIGKILL)."""

    def __init__(self, *extra):
        self.proc = subprocess.Popen([SWITCHD, "--bind", "127.0.0.1", "--port", "0", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        deadline = time.monotonic() + 20
        self.addr = None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            if line.startswith("ina-switchd listening on "):
                self.addr = line.split()[-1]
                break
        if self.addr is None:
            self.proc.kill()
            raise RuntimeError("ina-switchd did not start: " + "".join(self.lines))
        # Keep draining its output so it never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()
