"""The fallback's recovery when ranks stop one call apart: rank 1 misses the results of fabric
call 1 (a relay drops them) while rank 0 completes it. Rank 0 must hand its result of call 1 to
rank 1 (bit-identical), and call 2 onwards runs on Gloo, whether rank 0's next op is a fabric
call (it fails: job aborted) or a Gloo op (it sees the recovery in the store). Calls 1 and 2 are
AVG: rank 0's handed-over result of call 1 is averaged by the fabric already (rank 1 must not
divide it again), call 2's Gloo sum is divided after it."""
import os
import sys
import unittest

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ina_torch_testlib as lib  # noqa: E402

WORLD = 2


def inputs(call, seed):
    return [torch.randint(-2**20, 2**20, (3000,), dtype=torch.int32,
                          generator=torch.Generator().manual_seed(seed * 100 + call * 10 + r))
            for r in range(WORLD)]


def exact(call, seed):
    return torch.stack([x.long() for x in inputs(call, seed)]).sum(0).int()


def exact_avg(call, seed):  # int32 AVG: the sum divided truncating toward zero
    return torch.div(exact(call, seed).long(), WORLD, rounding_mode="trunc").int()


def worker(rank, relay_addr, port, seed, next_op, cut, done, q):
    import ina_torch
    ina_torch.configure(switch=relay_addr, progress_timeout_ms=1000)
    dist.init_process_group("ina", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    pg = ina_torch.backend()
    ref = dist.new_group(backend="gloo")
    t0 = inputs(0, seed)[rank].clone()
    dist.all_reduce(t0)  # fabric call 0
    assert torch.equal(t0, exact(0, seed))
    dist.barrier(group=ref)
    if rank == 0:
        cut.set()         # the parent makes the relay drop results to rank 1
        done.wait(10)
    dist.barrier(group=ref)
    t1 = inputs(1, seed)[rank].clone()
    dist.all_reduce(t1, op=dist.ReduceOp.AVG)  # fabric call 1: rank 0 completes it, rank 1 not
    if next_op == "gloo":
        b = torch.full((5,), float(rank))
        dist.broadcast(b, 0)  # rank 0 waits here while rank 1 times out in call 1
        assert torch.equal(b, torch.zeros(5))
    t2 = inputs(2, seed)[rank].clone()
    dist.all_reduce(t2, op=dist.ReduceOp.AVG)  # call 2: rank 0's fails (or never reaches the
    # fabric), then Gloo
    q.put((rank, torch.equal(t1, exact_avg(1, seed)), torch.equal(t2, exact_avg(2, seed)),
           pg.fabric_active, pg.fabric_calls, pg.fabric_status))
    dist.destroy_process_group()


class RecoveryTest(unittest.TestCase):
    def run_case(self, next_op):
        seed = lib.seed()
        ctx = mp.get_context("spawn")
        cut, done, q = ctx.Event(), ctx.Event(), ctx.SimpleQueue()
        with lib.Switch() as sw:
            relay = lib.Relay(sw.addr)
            try:
                pc = mp.spawn(worker, args=(relay.addr, lib.free_port(), seed, next_op, cut,
                                            done, q), nprocs=WORLD, join=False)
                self.assertTrue(cut.wait(30), "rank 0 never asked for the cut")
                relay.cut_results_to(1)
                done.set()
                while not pc.join(timeout=60):
                    pass
            finally:
                relay.close()
        got = {}
        for _ in range(WORLD):
            rank, ok1, ok2, active, calls, status = q.get()
            print(f"rank {rank}: call 1 ok {ok1}, call 2 ok {ok2}, fabric calls {calls}, "
                  f"{status}")
            got[rank] = (ok1, ok2, active, calls)
        self.assertGreater(relay.dropped, 0, "the relay dropped nothing")
        self.assertEqual(got[0], (True, True, False, 2), "rank 0")
        self.assertEqual(got[1], (True, True, False, 1), "rank 1")

    def test_next_op_fabric(self):
        self.run_case("fabric")

    def test_next_op_gloo(self):
        self.run_case("gloo")


if __name__ == "__main__":
    unittest.main()
