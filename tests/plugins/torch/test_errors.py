"""Errors at the PyTorch boundary: no fabric at init (fallback off: init raises naming the
cause; on: one warning and every op through Gloo), bad options."""
import os
import sys
import unittest

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ina_torch_testlib as lib  # noqa: E402


def no_fabric_worker(rank, world, port, dead_switch, fallback, errors):
    import ina_torch
    ina_torch.configure(switch=dead_switch, join_timeout_ms=1000, fallback=fallback)
    try:
        dist.init_process_group("ina", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world)
    except RuntimeError as e:
        errors.put((rank, str(e)))
        return
    pg = ina_torch.backend()
    assert not pg.fabric_active and pg.job_id == -1
    t = torch.arange(1000, dtype=torch.float32) * (rank + 1)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    want = torch.arange(1000, dtype=torch.float32) * sum(range(1, world + 1)) / world
    assert torch.equal(t, want), "all_reduce on the Gloo fallback"
    errors.put((rank, "ok " + pg.fabric_status))
    dist.destroy_process_group()


def init_worker(rank, world, port, switch, q, options, env):
    """init_process_group only: puts (rank, "ok <fabric_status>") or (rank, its error) on q.
    `options(rank)` are the ina_torch.configure options; `env` is set first (None: unset)."""
    import ina_torch
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    ina_torch.configure(switch=switch, **options.get(rank, options.get("all", {})))
    try:
        dist.init_process_group("ina", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world)
        q.put((rank, "ok " + ina_torch.backend().fabric_status))
        dist.destroy_process_group()
    except RuntimeError as e:
        q.put((rank, str(e)))


class ErrorsTest(unittest.TestCase):
    def run_no_fabric(self, fallback, world=2):
        dead = f"127.0.0.1:{lib.free_port()}"  # nothing listens there
        ctx = mp.get_context("spawn")
        q = ctx.SimpleQueue()
        mp.spawn(no_fabric_worker, args=(world, lib.free_port(), dead, fallback, q),
                 nprocs=world, join=True)
        got = dict(q.get() for _ in range(world))
        return dead, got

    def test_unreachable_at_init_fallback_off_raises(self):
        dead, got = self.run_no_fabric(False)
        for rank, msg in got.items():
            print(f"rank {rank}: {msg}")
            self.assertIn(f"fabric at {dead}", msg)
            self.assertIn("DEADLINE_EXCEEDED", msg)
            self.assertIn("INA_FALLBACK=off", msg)

    def test_unreachable_at_init_falls_back_to_gloo(self):
        dead, got = self.run_no_fabric(True)
        for rank, msg in got.items():
            print(f"rank {rank}: {msg}")
            self.assertTrue(msg.startswith("ok not used: "), msg)
            self.assertIn(f"fabric at {dead}", msg)

    def run_bad_k(self, bad_rank, world=2):
        q = mp.get_context("spawn").SimpleQueue()
        with lib.Switch() as sw:
            options = {bad_rank: {"k": 100}, "all": {"k": 256}}
            mp.spawn(init_worker, args=(world, lib.free_port(), sw.addr, q, options, {}),
                     nprocs=world, join=True)
        got = dict(q.get() for _ in range(world))
        for rank, msg in sorted(got.items()):
            print(f"rank {rank}: {msg[:300]}")
        return got

    def test_bad_k_on_rank0_raises_everywhere(self):
        # Bad input is an error, not a reason to fall back, and no rank waits for the store.
        got = self.run_bad_k(0)
        for msg in got.values():
            self.assertIn("ina: rank 0: INVALID_ARGUMENT: config: k 100", msg)

    def test_bad_k_on_rank1_raises_everywhere(self):
        got = self.run_bad_k(1)
        for msg in got.values():
            self.assertIn("ina: rank 1: INVALID_ARGUMENT: config: k 100", msg)

    def test_keyed_without_admin_key_raises_everywhere(self):
        # Rank 0 must make and install the secret: without INA_ADMIN_KEY that is a configuration
        # error on every rank (not a reason to fall back), naming what to set.
        world = 2
        q = mp.get_context("spawn").SimpleQueue()
        with lib.Switch() as sw:
            env = {"INA_JOB_SEC": "mac", "INA_JOB_KEY": None, "INA_ADMIN_KEY": None}
            mp.spawn(init_worker, args=(world, lib.free_port(), sw.addr, q, {}, env),
                     nprocs=world, join=True)
        got = dict(q.get() for _ in range(world))
        for rank, msg in sorted(got.items()):
            print(f"rank {rank}: {msg[:300]}")
            self.assertIn("ina: rank 0: INA_JOB_SEC=mac without INA_JOB_KEY", msg)
            self.assertIn("INA_ADMIN_KEY", msg)

    def test_bad_options(self):
        import ina_torch
        with self.assertRaisesRegex(ValueError, "unknown option"):
            ina_torch.configure(swtich="x")


if __name__ == "__main__":
    unittest.main()
