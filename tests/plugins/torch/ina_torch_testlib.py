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


def admin_key_file(directory):
    """A fresh switch admin secret (hex, mode 0600) in `directory`; returns its path."""
    path = os.path.join(directory, "admin.key")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    return path


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


class Relay:
    """A UDP relay between the workers and a switch, on 127.0.0.1 (ephemeral port): one upstream
    socket per worker, so the switch sees each worker as its own peer. `cut_results_to(rank)`
    drops every packet from the switch to that rank from then on (its packets still reach the
    switch), which is how a test makes one rank miss the results of a call the others complete.
    Ranks are learnt from the rank field (bytes 8-9, big-endian) of each worker's first packet."""

    def __init__(self, switch_addr):
        import select
        self._select = select
        host, port = switch_addr.rsplit(":", 1)
        self.upstream_addr = (host, int(port))
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.by_client = {}  # client addr -> upstream socket
        self.rank_of = {}    # upstream socket -> rank
        self.client_of = {}  # upstream socket -> client addr
        self.cut = set()
        self.dropped = 0
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def cut_results_to(self, rank):
        self.cut.add(rank)

    def _run(self):
        while not self._stop:
            socks = [self.sock] + list(self.by_client.values())
            ready, _, _ = self._select.select(socks, [], [], 0.05)
            for s in ready:
                if s is self.sock:
                    data, client = s.recvfrom(65536)
                    up = self.by_client.get(client)
                    if up is None:
                        up = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                        up.connect(self.upstream_addr)
                        self.client_of[up] = client
                        self.by_client[client] = up
                        if len(data) >= 10:
                            self.rank_of[up] = int.from_bytes(data[8:10], "big")
                    try:
                        up.send(data)
                    except OSError:
                        pass
                else:
                    try:
                        data = s.recv(65536)
                    except OSError:
                        continue
                    if self.rank_of.get(s) in self.cut:
                        self.dropped += 1
                        continue
                    self.sock.sendto(data, self.client_of[s])

    def close(self):
        self._stop = True
        self._thread.join(timeout=5)
        for s in self.by_client.values():
            s.close()
        self.sock.close()
