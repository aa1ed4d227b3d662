#!/usr/bin/env python3
"""Tests of scripts/gpu/nccl-log.sh, which scripts/gpu-check.sh uses to read what NCCL said.

NCCL writes its INFO lines to stdout unless NCCL_DEBUG_FILE is set (NCCL 2.28.9 on the H200 run of
issue #22 did: gpu-check, reading only stderr, reported the plugin not loaded while it carried
every all-reduce). The counts must be the same whichever stream the lines are in, and zero only
when no stream has them. The lines are NCCL's and the plugin's formats (NCCL's INFO prefix, its
"NET/Plugin: Loaded collnet plugin %s (v11)" and TUNING "%s: %ld Bytes -> Algo %s proto %s").
"""
import os
import subprocess
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts", "gpu",
                      "nccl-log.sh")
P = "h200:1234:1240 [0] NCCL INFO "

INFO = [
    P + "NET/Plugin: Loaded net plugin ina (v11)",
    P + "NET/Plugin: Loaded collnet plugin ina (v11)",
    P + "NET/ina : TCP point-to-point transport, comm 1a2b; buffers: host and CUDA",
    P + "NET/ina : CollNet job 7 node 0/2 on 127.0.0.1:47000 (K=256, window 64)",
    P + "CollNet 00/0 : 0 [receive] via COLLNET/ina/0/GDRDMA",
    P + "Connected CollNet Chains",
    P + "AllReduce: 4194304 Bytes -> Algo CollNetChain proto Simple channel{Lo..Hi}={0..1}",
    P + "AllReduce: 4194304 Bytes -> Algo CollNetDirect proto Simple channel{Lo..Hi}={0..1}",
    P + "AllReduce: 4 Bytes -> Algo Ring proto LL channel{Lo..Hi}={0..0}",
]
WANT = {"loaded": 1, "joined": 1, "connected": 1, "collnet_ops": 2, "other_ops": 1,
        "gdr_setups": 1, "offered": 1}
NONE = {k: 0 for k in WANT}


def counts(files, tag=""):
    """Writes {name: lines} into a fresh folder and returns nccl-log.sh's counts there."""
    with tempfile.TemporaryDirectory() as d:
        for name, lines in files.items():
            with open(os.path.join(d, tag + name), "w", encoding="utf-8") as fh:
                fh.write("\n".join(lines) + ("\n" if lines else ""))
        out = subprocess.run(["bash", SCRIPT, d, tag], check=True, capture_output=True,
                             text=True).stdout
    return {k: int(v) for k, v in (line.split() for line in out.splitlines())}


class NcclLogTest(unittest.TestCase):
    def test_info_on_stdout(self):
        # NCCL 2.28.9's default: INFO on stdout, the driver's own messages on stderr.
        got = counts({"rank0.out": INFO + ['{"float_ok":true,"int_ok":true}'],
                      "rank0.log": ["ina-nccl-allreduce: rank 0 of 2"],
                      "rank1.out": [], "rank1.log": []})
        self.assertEqual(got, WANT)

    def test_info_on_stderr(self):
        got = counts({"rank0.out": [], "rank0.log": INFO, "rank1.out": [], "rank1.log": []})
        self.assertEqual(got, WANT)

    def test_both_ranks_both_streams_add_up(self):
        got = counts({"rank0.out": INFO[:4], "rank0.log": INFO[4:], "rank1.out": INFO,
                      "rank1.log": []})
        self.assertEqual(got, {k: 2 * v for k, v in WANT.items()})

    def test_not_loaded_only_when_no_stream_says_so(self):
        other = [P + "NET/Plugin: Could not find: ina libnccl-net-ina.so",
                 P + "NET/Socket : Using [0]lo:127.0.0.1<0>",
                 P + "AllReduce: 64 Bytes -> Algo Ring proto LL channel{Lo..Hi}={0..0}"]
        got = counts({"rank0.out": other, "rank0.log": [], "rank1.out": other,
                      "rank1.log": ["NCCL WARN something else"]})
        self.assertEqual(got, dict(NONE, other_ops=2))

    def test_missing_files_and_tags(self):
        self.assertEqual(counts({}), NONE)
        self.assertEqual(counts({"rank1.out": INFO}, tag="gpubuf_"), WANT)
        # Another tag's files are not read (the untagged run does not see gpubuf_rank1.out).
        self.assertEqual(counts({"gpubuf_rank1.out": INFO}), NONE)

    def test_other_plugin_named_alike_is_not_ours(self):
        got = counts({"rank0.out": [P + "NET/Plugin: Loaded collnet plugin inaX (v11)"]})
        self.assertEqual(got["loaded"], 0)


if __name__ == "__main__":
    unittest.main()
