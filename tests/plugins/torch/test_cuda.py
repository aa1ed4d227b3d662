"""CUDA tensors through the backend (docs/pytorch.md, "CUDA tensors").

test_cuda_tensor_refused_with_the_reason runs everywhere torch has no CUDA (Debian's is
CPU-only): a tensor that claims device cuda:0 (a wrapper subclass, no storage) reaches the
backend's all_reduce, which refuses it at the call naming why (this build's CUDA path, or a torch
without CUDA); the group keeps working for CPU tensors.

test_cuda_allreduce_matches_cpu (label hw) needs a torch with CUDA and a GPU, and skips with the
reason otherwise: 2 processes on one switch, float32 (SUM, AVG), int32 and bfloat16 CUDA tensors
all-reduced through the fabric, bit-identical to the same values through the CPU path, written on
a side stream the caller made current (so the ordering after torch's current stream is
exercised), results read on another stream after wait(), and through the future's then()."""
import os
import sys
import unittest

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ina_torch_testlib as lib  # noqa: E402


class FakeCuda(torch.Tensor):
    """A tensor whose device says cuda:0 without CUDA: it only has to reach the backend."""

    @staticmethod
    def __new__(cls, n):
        return torch.Tensor._make_wrapper_subclass(cls, (n,), dtype=torch.float32,
                                                   device="cuda:0")

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        from torch.utils._mode_utils import no_dispatch
        with no_dispatch():  # c10d's ops run their kernel, i.e. the backend's allreduce
            return func(*args, **(kwargs or {}))


def refused_worker(rank, world, port, switch, q):
    import ina_torch
    ina_torch.configure(switch=switch)
    dist.init_process_group("ina", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    pg = ina_torch.backend()
    try:
        dist.all_reduce(FakeCuda(16))
        msg = "no error"
    except RuntimeError as e:
        msg = str(e)
    t = torch.full((1000,), float(rank + 1))
    dist.all_reduce(t)
    ok = torch.equal(t, torch.full((1000,), float(sum(range(1, world + 1)))))
    q.put((rank, msg, ok, pg.fabric_active, pg.fabric_calls, ina_torch.CUDA_PATH_BUILT))
    dist.destroy_process_group()


def inputs(rank, n, seed):
    g = torch.Generator().manual_seed(seed * 100 + rank)
    return {
        "f32": torch.randn(n, generator=g) * (1 + rank),
        "i32": torch.randint(-1000, 1000, (n,), generator=g, dtype=torch.int32),
        "bf16": torch.randn(n, generator=g).to(torch.bfloat16),
    }


def bits(t):
    return t.view(torch.int16) if t.element_size() == 2 else t.view(torch.int32)


def cuda_worker(rank, world, port, switch, seed, q):
    import ina_torch
    ina_torch.configure(switch=switch)
    dist.init_process_group("ina", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    pg = ina_torch.backend()
    dev = torch.device("cuda", 0)
    errors = []
    for n in (1, 255, 4099, 1 << 20):
        x = inputs(rank, n, seed)
        for name, op in (("f32", dist.ReduceOp.SUM), ("f32", dist.ReduceOp.AVG),
                         ("i32", dist.ReduceOp.SUM), ("bf16", dist.ReduceOp.SUM)):
            cpu = x[name].clone()
            dist.all_reduce(cpu, op=op)
            # The CUDA input is written on a side stream made current: the backend must order
            # its reads after that stream's work without a host synchronisation.
            side = torch.cuda.Stream(dev)
            with torch.cuda.stream(side):
                gpu = torch.empty(n, dtype=x[name].dtype, device=dev)
                gpu.copy_(x[name].pin_memory(), non_blocking=True)
                gpu.mul_(1)  # more work on the stream before the call
                work = dist.all_reduce(gpu, op=op, async_op=True)
                work.wait()  # the side stream waits for the result (device side)
                back = gpu.clone().cpu()  # on the side stream, after the wait
            if not torch.equal(bits(back), bits(cpu)):
                diff = (back.double() - cpu.double()).abs().max().item()
                errors.append(f"n={n} {name} op={op}: CUDA result differs from the CPU path "
                              f"(max |diff| {diff})")
        # The future: then() on a CUDA-aware future.
        g = x["f32"].to(dev)
        fut = dist.all_reduce(g, async_op=True).get_future()
        summed = fut.then(lambda f: f.value()[0] * 2).wait()
        cpu = x["f32"].clone()
        dist.all_reduce(cpu)
        if not torch.equal(summed.cpu(), cpu * 2):
            errors.append(f"n={n}: future.then result differs")
    q.put((rank, errors, pg.fabric_active, pg.fabric_calls))
    dist.destroy_process_group()


class CudaTest(unittest.TestCase):
    def test_cuda_tensor_refused_with_the_reason(self):
        if torch.cuda.is_available():
            self.skipTest("torch has CUDA here: test_cuda_allreduce_matches_cpu covers it")
        world = 2
        with lib.Switch() as sw:
            ctx = mp.get_context("spawn")
            q = ctx.SimpleQueue()
            mp.spawn(refused_worker, args=(world, lib.free_port(), sw.addr, q), nprocs=world,
                     join=True)
            got = [q.get() for _ in range(world)]
        for rank, msg, ok, active, calls, built in got:
            print(f"rank {rank}: CUDA path built: {built}; error: {msg}")
            self.assertIn(f"ina: rank {rank}: allreduce of a tensor on cuda:0: ", msg)
            if built:
                self.assertIn("this torch has no CUDA support", msg)
            else:
                self.assertIn("built without the CUDA path", msg)
            self.assertTrue(ok, "the CPU all_reduce after the refused call")
            self.assertTrue(active, "the fabric stays in use")
            self.assertEqual(calls, 1, "the refused call never reached the fabric")

    def test_cuda_allreduce_matches_cpu(self):
        import ina_torch
        if not torch.cuda.is_available():
            self.skipTest("torch.cuda.is_available() is false (Debian's python3-torch is "
                          "CPU-only; this needs a torch with CUDA and a GPU)")
        if not ina_torch.CUDA_PATH_BUILT:
            self.skipTest("ina_torch was built without the CUDA path (no ina::gpu_domain)")
        world = 2
        with lib.Switch() as sw:
            ctx = mp.get_context("spawn")
            q = ctx.SimpleQueue()
            mp.spawn(cuda_worker, args=(world, lib.free_port(), sw.addr, lib.seed(), q),
                     nprocs=world, join=True)
            got = [q.get() for _ in range(world)]
        for rank, errors, active, calls in got:
            print(f"rank {rank}: fabric active {active}, {calls} fabric calls")
            self.assertTrue(active)
            self.assertEqual(errors, [], f"rank {rank}")
            self.assertEqual(calls, 4 * (4 * 2 + 2))


if __name__ == "__main__":
    unittest.main()
