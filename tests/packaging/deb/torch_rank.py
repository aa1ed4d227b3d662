"""Two ranks of torch.distributed over the installed python3-ina-torch (deb_test.sh): an int32 and
a float32 all-reduce through the fabric, checked exactly, and the backend's metrics dict.
usage: python3 torch_rank.py SWITCH_HOST:PORT"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, world, init, switch):
    import ina_torch  # the installed package, not a build tree
    assert ina_torch.__file__.startswith("/usr/lib/python3/dist-packages/"), ina_torch.__file__
    ina_torch.configure(switch=switch)
    dist.init_process_group("ina", init_method=init, rank=rank, world_size=world)
    pg = dist.distributed_c10d._get_default_group()
    assert pg.fabric_active, pg.fabric_status
    x = torch.arange(10000, dtype=torch.int32) * (rank + 1)
    dist.all_reduce(x)
    assert torch.equal(x, torch.arange(10000, dtype=torch.int32) * 3), x[:8]
    f = (torch.arange(10000) % 100).float() * 0.5 * (rank + 1)  # halves: quantize exactly
    dist.all_reduce(f)
    assert torch.equal(f, (torch.arange(10000) % 100).float() * 1.5), f[:8]
    m = pg.metrics()
    assert m["fabric_calls"] == 2 and m["ops_failed"] == 0, m
    print(f"torch rank {rank}/{world}: ok ({ina_torch.__file__}, {m['results']} results)",
          flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    init = "file://" + os.path.join(tempfile.mkdtemp(), "store")
    mp.spawn(rank_main, args=(2, init, sys.argv[1]), nprocs=2, join=True)
