"""Backend "ina" against gloo: allreduce SUM/AVG through the fabric, everything else through
gloo; tcp://, file:// and env:// init under mp.spawn, and torchrun. A real ina-switchd on a free
loopback port per test. INA_SEED=<n> replays."""
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import torch
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ina_torch_testlib as lib  # noqa: E402
import semantics_worker  # noqa: E402
import ina_torch  # noqa: E402


class SemanticsTest(unittest.TestCase):
    def spawn(self, world, init_method, env=None, checks=None):
        seed = lib.seed()
        with lib.Switch() as sw:
            e = {"INA_SWITCH": sw.addr, **(env or {})}
            mp.spawn(semantics_worker.spawn_main, args=(world, init_method, seed, e, checks),
                     nprocs=world, join=True)

    def test_tcp_4_ranks(self):
        self.spawn(4, f"tcp://127.0.0.1:{lib.free_port()}")

    def test_file_3_ranks(self):
        d = tempfile.mkdtemp(prefix="ina_torch_")
        try:
            self.spawn(3, f"file://{d}/rendezvous")
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_env_2_ranks(self):
        port = lib.free_port()
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
        self.spawn(2, "env://")

    @unittest.skipUnless(ina_torch.IS_BACKEND, f"torch {torch.__version__} has no c10d::Backend "
                         "(torch 2.x's per-device backends, coalescing manager, functional "
                         "collectives)")
    def test_torch2_apis(self):
        self.spawn(2, f"tcp://127.0.0.1:{lib.free_port()}", checks="torch2")

    def test_keyed_rank0_shares_the_secret(self):
        # INA_JOB_SEC=mac without INA_JOB_KEY: rank 0 of every group (the default one and the
        # subgroups check_subgroups makes) makes a fresh secret, installs it with the switch's admin
        # secret and shares it through the store; every JOIN proves it. The switch requires keys,
        # so a JOIN without one would be refused, and run_checks asserts the fabric carried them.
        d = tempfile.mkdtemp(prefix="ina_torch_keyed_")
        try:
            admin = lib.admin_key_file(d)
            seed = lib.seed()
            with lib.Switch("--admin-key-file", admin, "--require-job-keys", "1") as sw:
                e = {"INA_SWITCH": sw.addr, "INA_JOB_SEC": "mac", "INA_ADMIN_KEY": admin}
                mp.spawn(semantics_worker.spawn_main,
                         args=(2, f"tcp://127.0.0.1:{lib.free_port()}", seed, e, None),
                         nprocs=2, join=True)
                out = "".join(sw.lines)
            self.assertNotIn("refused", out)
            with open(admin) as f:
                self.assertNotIn(f.read().strip(), out, "the admin secret was printed")
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_keyed_tree_every_leaf_and_the_spine_get_the_key(self):
        # A spine and two leaves, ranks 0-1 at leaf 0 and 2-3 at leaf 1 (each rank's INA_SWITCH),
        # INA_JOB_SEC=mac without INA_JOB_KEY: rank 0 installs the secret at its leaf, rank 2 (the
        # first at the other leaf) at its own, and each leaf passes it on to the spine
        # (--upstream-admin-key-file; one admin secret for the fabric). Every switch requires
        # keys, so a switch without it would refuse the job.
        d = tempfile.mkdtemp(prefix="ina_torch_tree_")
        try:
            admin = lib.admin_key_file(d)
            seed = lib.seed()
            keyed = ("--admin-key-file", admin, "--require-job-keys", "1")
            with lib.Switch(*keyed) as spine, contextlib.ExitStack() as stack:
                leaves = [stack.enter_context(lib.Switch(
                    *keyed, "--upstream", spine.addr, "--leaf-index", str(i), "--leaves", "2",
                    "--upstream-admin-key-file", admin)) for i in range(2)]
                e = {"INA_SWITCH": [leaves[r // 2].addr for r in range(4)],
                     "INA_JOB_SEC": "mac", "INA_ADMIN_KEY": admin}
                mp.spawn(semantics_worker.spawn_main,
                         args=(4, f"tcp://127.0.0.1:{lib.free_port()}", seed, e, "tree"),
                         nprocs=4, join=True)
                out = "".join(spine.lines + leaves[0].lines + leaves[1].lines)
            self.assertNotIn("refused", out)
            self.assertNotIn("did not acknowledge", out)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_torchrun_2_ranks(self):
        seed = lib.seed()
        # torchrun's main() through ina_torch.run, which also runs where torch has no libuv
        # (USE_LIBUV=0: Debian 13's torch 2.6); elsewhere it is torchrun unchanged.
        cmd = [sys.executable, "-m", "ina_torch.run"]
        with lib.Switch() as sw:
            env = dict(os.environ, INA_SWITCH=sw.addr, OMP_NUM_THREADS="1")
            # Debian's torch 1.13 on Python 3.11: the default "--redirects 0 --tee 0" parse to
            # None (3.11 no longer iterates the zero-valued Flag member); "1" (stdout) works.
            # Bounded below ctest's 120 s, so that a hang prints what torchrun said.
            try:
                r = subprocess.run(cmd + ["--redirects", "1", "--tee", "1", "--nproc_per_node", "2",
                                          "--master_addr", "127.0.0.1",
                                          "--master_port", str(lib.free_port()),
                                          os.path.join(HERE, "semantics_worker.py"), str(seed)],
                                   env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, timeout=90)
            except subprocess.TimeoutExpired as e:
                out = e.output.decode() if isinstance(e.output, bytes) else (e.output or "")
                self.fail(f"torchrun did not finish in 90 s; its output:\n{out}")
        print(r.stdout)
        self.assertEqual(r.returncode, 0, "torchrun failed")
        self.assertEqual(r.stdout.count("all checks passed"), 2)


if __name__ == "__main__":
    unittest.main()
