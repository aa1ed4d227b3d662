"""One rank of the semantics test: backend "ina" against "gloo" (a reference group in the same
processes) and against exact float64 sums. Run by test_semantics.py through mp.spawn, or by
torchrun (then rank and world come from the environment, the switch from INA_SWITCH).

Every check raises AssertionError naming what differed; mp.spawn / torchrun then fail."""
import math
import os
import sys

import torch
import torch.distributed as dist

import ina_torch

K = 256  # elements per packet: set here (the default, 0, follows the path MTU: 2048 on loopback)
os.environ.setdefault("INA_K", str(K))


def gather_all(t, group):
    """Every rank's copy of t (through Gloo), to compare ranks bit for bit."""
    out = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    dist.all_gather(out, t.contiguous(), group=group)
    return out


def same_on_all_ranks(t, ref, what):
    copies = gather_all(t.view(torch.int32) if t.dtype == torch.float32 else t, ref)
    for r, c in enumerate(copies):
        assert torch.equal(c, copies[0]), f"{what}: rank {r} differs from rank 0"


def quant_bound(inputs, world):
    """Per-element bound of quant.h for the float sum of `inputs` (one float32 tensor per rank),
    blocks of K consecutive elements, against the exact float64 sum."""
    x = torch.stack([i.reshape(-1).double() for i in inputs])
    n = x.shape[1]
    p = 30 - math.ceil(math.log2(world))
    bound = torch.empty(n, dtype=torch.float64)
    exact = x.sum(0)
    for b in range(0, n, K):
        m = x[:, b:b + K].abs().max().item()
        e = math.frexp(m)[1] if m > 0 else -126
        step = world * 2.0 ** (e - p - 1)
        bound[b:b + K] = step + 2.0 ** -24 * (exact[b:b + K].abs() + step)
    return exact, bound


def rank_inputs(shape, dtype, seed, world, scale=1.0):
    """The same inputs on every rank's side: rank r's tensor from generator seed + r."""
    out = []
    for r in range(world):
        g = torch.Generator().manual_seed(seed * 1000 + r)
        if dtype == torch.int32:
            out.append(torch.randint(-2**20, 2**20, shape, generator=g, dtype=torch.int32))
        else:
            out.append((torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype))
    return out


def check_float_sum_avg(rank, world, ref, seed):
    for n in (1, K - 1, K + 1, 3000):
        inputs = rank_inputs((n,), torch.float32, seed + n, world, scale=10.0)
        t = inputs[rank].clone()
        dist.all_reduce(t)
        exact, bound = quant_bound(inputs, world)
        err = (t.double() - exact).abs()
        assert bool((err <= bound).all()), f"float32 SUM n={n}: error {err.max()} over bound"
        same_on_all_ranks(t, ref, f"float32 SUM n={n}")
        g = inputs[rank].clone()
        dist.all_reduce(g, group=ref)
        # gloo's float32 ring sum rounds too: at most (world - 1) roundings of partial sums
        sum_abs = torch.stack([i.double().abs() for i in inputs]).sum(0)
        gloo_bound = (world - 1) * 2**-24 * sum_abs
        assert bool(((t.double() - g.double()).abs() <= bound + gloo_bound).all()), \
            f"float32 SUM n={n}: differs from gloo's beyond both bounds"
        a = inputs[rank].clone()
        dist.all_reduce(a, op=dist.ReduceOp.AVG)
        assert bool(((a.double() - exact / world).abs() <= bound / world + 1e-7 *
                     exact.abs() / world).all()), f"float32 AVG n={n}"
        same_on_all_ranks(a, ref, f"float32 AVG n={n}")
        # One definition of AVG (AllReduceOptions::average): the SUM's result divided by the world
        # with one IEEE float32 division (ATen's CPU div), bit for bit.
        assert torch.equal(a.view(torch.int32), (t / world).view(torch.int32)), \
            f"float32 AVG n={n} is not the SUM's result / world bit for bit"

    print(f"rank {rank}: float32 SUM/AVG within the quantization bound, ranks identical",
          flush=True)


def check_int32(rank, world, ref, seed):
    inputs = rank_inputs((5000,), torch.int32, seed, world)
    t = inputs[rank].clone()
    dist.all_reduce(t)
    g = inputs[rank].clone()
    dist.all_reduce(g, group=ref)
    assert torch.equal(t, g), "int32 SUM differs from gloo's"
    exact = torch.stack([i.long() for i in inputs]).sum(0)
    assert torch.equal(t.long(), exact), "int32 SUM not exact"
    a = inputs[rank].clone()
    dist.all_reduce(a, op=dist.ReduceOp.AVG)
    assert torch.equal(a, torch.div(exact, world, rounding_mode="trunc").int()), \
        "int32 AVG is not the truncated mean"
    print(f"rank {rank}: int32 SUM exact and equal to gloo, AVG truncates", flush=True)


def check_other_float_dtypes(rank, world, ref, seed):
    for dtype, rel in ((torch.float16, 2**-10), (torch.bfloat16, 2**-7), (torch.float64, 0)):
        inputs = rank_inputs((700,), dtype, seed, world)
        t = inputs[rank].clone()
        dist.all_reduce(t)
        assert t.dtype == dtype
        exact, bound = quant_bound([i.float() for i in inputs], world)
        # quantization of the float32 staging, then rounding to the dtype
        err = (t.double() - exact).abs()
        limit = bound + rel * (exact.abs() + bound) + 2**-24 * exact.abs()
        assert bool((err <= limit).all()), f"{dtype} SUM: error {err.max()} over {limit.max()}"
        same_on_all_ranks(t.double(), ref, f"{dtype} SUM")
    print(f"rank {rank}: float16/bfloat16/float64 SUM within bound (through float32)", flush=True)


def check_list_and_noncontiguous(rank, world, ref, seed):
    ins = rank_inputs((300,), torch.int32, seed, world)
    a, b = ins[rank].clone(), ins[rank] * 3
    ga, gb = a.clone(), b.clone()
    # A list of tensors in one call (dist.all_reduce_multigpu is gone in torch 2.x): the group's
    # own allreduce, on both torch lines.
    dist.distributed_c10d._get_default_group().allreduce([a, b]).wait()
    ref.allreduce([ga, gb]).wait()
    assert torch.equal(a, ga) and torch.equal(b, gb), "list of tensors differs from gloo's"
    parts = [ins[rank][:100].clone(), ins[rank][100:].clone().view(20, 10), ins[rank][:7] * 5]
    want = [p.clone() for p in parts]
    dist.all_reduce_coalesced(parts)  # one fabric call for the concatenation
    dist.all_reduce_coalesced(want, group=ref)
    assert all(torch.equal(p, w) for p, w in zip(parts, want)), "all_reduce_coalesced vs gloo"
    base = rank_inputs((40, 30), torch.int32, seed + 1, world)[rank]
    m = base.clone()
    view = m.t()[::2]  # non-contiguous
    assert not view.is_contiguous()
    dist.all_reduce(view)
    exact = torch.stack([x.long() for x in rank_inputs((40, 30), torch.int32, seed + 1, world)])
    exact = exact.sum(0)
    assert torch.equal(view.long(), exact.t()[::2]), "non-contiguous: wrong sum"
    untouched = torch.ones_like(m, dtype=torch.bool)
    untouched.t()[::2] = False
    assert torch.equal(m[untouched], base[untouched]), "non-contiguous: wrote outside the view"
    print(f"rank {rank}: list of tensors and all_reduce_coalesced equal to gloo, non-contiguous "
          f"view correct", flush=True)


def check_async(rank, world, ref, seed):
    ins = rank_inputs((2000,), torch.int32, seed, world)
    exact = torch.stack([x.long() for x in ins]).sum(0).int()
    tensors = [ins[rank] + i for i in range(4)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    futs = [w.get_future() for w in works]
    for i in reversed(range(4)):
        works[i].wait()
        assert works[i].is_completed()
        value = futs[i].wait()
        assert isinstance(value, list) and len(value) == 1, f"future value {type(value)}"
        assert torch.equal(value[0], exact + world * i), f"async op {i}: wrong result"
    chained = dist.all_reduce(ins[rank].clone(), async_op=True).get_future().then(
        lambda f: f.value()[0] * 2)
    assert torch.equal(chained.wait(), exact * 2), "future.then"
    print(f"rank {rank}: async_op futures complete with the outputs", flush=True)


def check_subgroups(rank, world, ref, seed):
    if world < 2:
        return
    pg_default = ina_torch.backend()
    sub_ranks = [0, 1]
    sub = dist.new_group(sub_ranks, backend="ina")
    everyone = dist.new_group(list(range(world)), backend="ina")
    jobs = gather_all(torch.tensor([pg_default.job_id, ina_torch.backend(everyone).job_id,
                                    ina_torch.backend(sub).job_id if rank in sub_ranks else -1]),
                      ref)
    if pg_default.fabric_active:
        ids = {int(j) for j in jobs[0][:2]} | {int(jobs[0][2])}
        assert len(ids) == 3, f"groups share a fabric job: {jobs[0].tolist()}"
    ins = rank_inputs((600,), torch.int32, seed, world)
    exact_all = torch.stack([x.long() for x in ins]).sum(0).int()
    exact_sub = torch.stack([ins[r].long() for r in sub_ranks]).sum(0).int()
    for _ in range(3):  # interleaved on both groups
        t = ins[rank].clone()
        w1 = dist.all_reduce(t, group=everyone, async_op=True)
        if rank in sub_ranks:
            s = ins[rank].clone()
            dist.all_reduce(s, group=sub)
            assert torch.equal(s, exact_sub), "subgroup sum"
        w1.wait()
        assert torch.equal(t, exact_all), "second group sum"
    print(f"rank {rank}: two new_group subgroups alive at once, own jobs", flush=True)


def check_gloo_ops(rank, world, ref, seed):
    g = torch.Generator().manual_seed(seed + rank)
    x = torch.randn(17, generator=g)
    for op in (dist.ReduceOp.MIN, dist.ReduceOp.MAX, dist.ReduceOp.PRODUCT):
        a, b = x.clone(), x.clone()
        dist.all_reduce(a, op=op)
        dist.all_reduce(b, op=op, group=ref)
        assert torch.equal(a, b), f"{op} differs from gloo"
    i64 = torch.arange(5, dtype=torch.int64) + rank
    j64 = i64.clone()
    dist.all_reduce(i64)
    dist.all_reduce(j64, group=ref)
    assert torch.equal(i64, j64), "int64 SUM (through gloo)"
    for root in range(world):
        a, b = x.clone(), x.clone()
        dist.broadcast(a, root)
        dist.broadcast(b, root, group=ref)
        assert torch.equal(a, b), "broadcast"
    outs = [torch.empty(17) for _ in range(world)]
    dist.all_gather(outs, x)
    assert all(torch.equal(o, r) for o, r in zip(outs, gather_all(x, ref))), "all_gather"
    flat = torch.empty(17 * world)
    dist.all_gather_into_tensor(flat, x)  # _allgather_base underneath
    assert torch.equal(flat, torch.cat(gather_all(x, ref))), "_all_gather_base"
    for dtype in (torch.int32, torch.int64):
        ins = [torch.arange(4, dtype=dtype) * (rank + 1) + 10 * j for j in range(world)]
        out = torch.empty(4, dtype=dtype)
        dist.reduce_scatter(out, [i.clone() for i in ins])
        want = sum(torch.arange(4, dtype=dtype) * (r + 1) + 10 * rank for r in range(world))
        assert torch.equal(out, want), f"reduce_scatter {dtype}: {out} != {want}"
    dist.barrier()
    if world >= 2:
        if rank == 0:
            dist.send(x * 2, 1)
            back = torch.empty(17)
            dist.recv(back, 1)
            assert torch.equal(back, x * 2 + 1), "send/recv round trip"
        elif rank == 1:
            got = torch.empty(17)
            dist.recv(got, 0)
            dist.send(got + 1, 0)
    print(f"rank {rank}: MIN/MAX/PRODUCT, int64, broadcast, all_gather, _all_gather_base, "
          f"reduce_scatter, barrier, send/recv equal to gloo", flush=True)


def check_reduce_scatter_tensor(rank, world, ref, seed):
    """reduce_scatter_tensor (c10d's _reduce_scatter_base) through the fabric, exact for int32."""
    ins = rank_inputs((world * 50,), torch.int32, seed + 7, world)
    exact = torch.stack([x.long() for x in ins]).sum(0).int()
    out = torch.empty(50, dtype=torch.int32)
    calls = ina_torch.backend().fabric_calls
    dist.reduce_scatter_tensor(out, ins[rank].clone())
    assert torch.equal(out, exact[rank * 50:(rank + 1) * 50]), "reduce_scatter_tensor: wrong sum"
    assert ina_torch.backend().fabric_calls == calls + 1, "reduce_scatter_tensor: not a fabric call"
    print(f"rank {rank}: reduce_scatter_tensor exact through the fabric", flush=True)


def check_torch2_apis(rank, world, ref, seed):
    """What torch 2.x dispatches to a per-device c10d::Backend: _get_backend, the coalescing
    manager (allreduce_coalesced, reduce_scatter_tensor_coalesced,
    allgather_into_tensor_coalesced), functional collectives (by group name)."""
    import torch.distributed._functional_collectives as funcol
    pg = dist.distributed_c10d._get_default_group()
    be = pg._get_backend(torch.device("cpu"))
    assert isinstance(be, ina_torch.ProcessGroupIna), f"_get_backend(cpu) is {type(be)}"
    ins = rank_inputs((world * 40,), torch.int32, seed + 11, world)
    exact = torch.stack([x.long() for x in ins]).sum(0).int()
    calls = be.fabric_calls
    a, b = ins[rank].clone(), ins[rank] * 2
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_reduce(a)
        dist.all_reduce(b)
    cm.wait()
    assert torch.equal(a, exact) and torch.equal(b, exact * 2), "coalesced all_reduce"
    outs = [torch.empty(40, dtype=torch.int32) for _ in range(2)]
    with dist._coalescing_manager():
        dist.reduce_scatter_tensor(outs[0], ins[rank].clone())
        dist.reduce_scatter_tensor(outs[1], ins[rank] * 3)
    part = exact[rank * 40:(rank + 1) * 40]
    assert torch.equal(outs[0], part) and torch.equal(outs[1], part * 3), \
        "coalesced reduce_scatter_tensor"
    assert be.fabric_calls == calls + 2, f"coalesced ops: {be.fabric_calls - calls} fabric calls"
    x = torch.arange(5, dtype=torch.int32) + 10 * rank
    flats = [torch.empty(5 * world, dtype=torch.int32) for _ in range(2)]
    with dist._coalescing_manager():
        dist.all_gather_into_tensor(flats[0], x)
        dist.all_gather_into_tensor(flats[1], x * 2)
    want = torch.cat(gather_all(x, ref))
    assert torch.equal(flats[0], want) and torch.equal(flats[1], want * 2), \
        "coalesced all_gather_into_tensor"
    y = funcol.all_reduce(ins[rank].clone(), "sum", pg)
    assert torch.equal(funcol.wait_tensor(y), exact), "functional all_reduce"
    z = funcol.reduce_scatter_tensor(ins[rank].clone(), "sum", 0, pg)
    assert torch.equal(funcol.wait_tensor(z), part), "functional reduce_scatter_tensor"
    assert be.fabric_calls == calls + 4, "functional collectives: not through the fabric"
    print(f"rank {rank}: _get_backend(cpu), coalesced all_reduce / reduce_scatter_tensor / "
          f"all_gather_into_tensor, functional all_reduce / reduce_scatter_tensor", flush=True)


CHECKS = [check_float_sum_avg, check_int32, check_other_float_dtypes,
          check_list_and_noncontiguous, check_async, check_subgroups, check_gloo_ops,
          check_reduce_scatter_tensor]
# torch 2.x only (test_semantics.test_torch2_apis skips on 1.13).
TORCH2_CHECKS = [check_torch2_apis]
# Through a tree of switches: the default group's all-reduces (a subgroup's ranks are numbered
# anew, and a leaf serves fixed ranks of each job: docs/hierarchy.md).
TREE_CHECKS = [check_float_sum_avg, check_int32]


def run_checks(rank, world, seed, checks=CHECKS):
    pg = ina_torch.backend()
    assert dist.get_backend() == "ina", dist.get_backend()
    print(f"rank {rank}: {pg.fabric_status}", flush=True)
    assert pg.fabric_active, f"rank {rank}: fabric not in use: {pg.fabric_status}"
    sec = os.environ.get("INA_JOB_SEC", "crc")
    if sec != "crc":
        assert f"sec={sec} job_secret=set" in pg.fabric_status, pg.fabric_status
    ref = dist.new_group(backend="gloo")
    for check in checks:
        check(rank, world, ref, seed)
    assert pg.fabric_active, f"rank {rank}: fell back: {pg.fabric_status}"
    m = pg.metrics()  # the communicator's counters (docs/pytorch.md, "Metrics")
    assert m["fabric_calls"] == pg.fabric_calls, m
    assert m["ops_completed"] >= pg.fabric_calls > 0 and m["ops_failed"] == 0, m
    assert m["results"] > 0 and m["packets_sent"] >= m["results"], m
    print(f"rank {rank}: {pg.fabric_calls} fabric calls, all checks passed", flush=True)
    # torch before 2.8 destroys a process group while holding the GIL, and a Gloo worker thread
    # that drops the last reference to a finished op's Python tensor needs the GIL under the lock
    # the destructor waits for: a deadlock, 2 runs in 15 here on torch 2.6 (pytorch/pytorch#154976).
    # So the last ops on each Gloo group (`ref`, and the backend's through the default group's
    # barrier) are on tensors kept alive until every group is gone.
    keep = [torch.zeros(1) for _ in range(4)]
    for t in keep:
        dist.all_reduce(t, group=ref)
    dist.barrier()
    dist.destroy_process_group()
    del ref, keep


def spawn_main(rank, world, init_method, seed, env, checks=None):
    # A list is a value per rank (INA_SWITCH of a tree: each rank's leaf).
    os.environ.update({k: v[rank] if isinstance(v, list) else v for k, v in env.items()})
    if init_method == "env://":
        os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(world)
    dist.init_process_group("ina", init_method=init_method, rank=rank, world_size=world)
    run_checks(rank, world, seed,
               {None: CHECKS, "torch2": TORCH2_CHECKS, "tree": TREE_CHECKS}[checks])


if __name__ == "__main__":  # under torchrun: env:// with RANK/WORLD_SIZE/MASTER_* set
    import faulthandler
    faulthandler.dump_traceback_later(60)  # a rank still here after 60 s says where it hangs
    dist.init_process_group("ina")
    run_checks(dist.get_rank(), dist.get_world_size(), int(sys.argv[1]) if len(sys.argv) > 1
               else 7)
