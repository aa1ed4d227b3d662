#!/usr/bin/python3
"""DistributedDataParallel training of a small MLP on the digits data set (sklearn's load_digits,
offline), N processes on CPU, with backend "ina" (through ina-switchd) or "gloo".

    build/bin/ina-switchd --port 47000 &
    PYTHONPATH=build/python examples/train_ddp.py --backend ina --switch 127.0.0.1:47000
    PYTHONPATH=build/python examples/train_ddp.py --backend gloo

Prints one line per step from rank 0 ("step S loss L"), then per rank the fabric status and a
fingerprint of its parameters ("rank R params sha256=..."), and the test accuracy. From the same
seed all ranks' parameters are bit-identical; the two backends differ only by the fabric's
quantization (docs/pytorch.md)."""
import argparse
import hashlib
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


def load_data(seed):
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x, dtype=torch.float32) / 16.0
    y = torch.tensor(y, dtype=torch.int64)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    x, y = x[perm], y[perm]
    return (x[:1500], y[:1500]), (x[1500:], y[1500:])


def make_model(hidden, layers):
    mods, width = [], 64
    for _ in range(layers):
        mods += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    mods.append(nn.Linear(width, 10))
    return nn.Sequential(*mods)


def say(line):
    """One write per line: the ranks share stdout, and print() writes the newline apart."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def fingerprint(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def worker(rank, args):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = args.master_addr
    os.environ["MASTER_PORT"] = str(args.port)
    if args.backend == "ina":
        import ina_torch
        opts = {}
        if args.switch:
            opts["switch"] = args.switch
        if args.progress_timeout_ms:
            opts["progress_timeout_ms"] = args.progress_timeout_ms
        ina_torch.configure(**opts)
    dist.init_process_group(args.backend, rank=rank, world_size=args.world)

    (xtr, ytr), (xte, yte) = load_data(args.seed)
    torch.manual_seed(args.seed)
    model = nn.parallel.DistributedDataParallel(make_model(args.hidden, args.layers))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    n = len(ytr)
    t0 = time.monotonic()
    step_times = []
    for step in range(args.steps):
        # Global batch of world x batch samples, rank r takes its slice.
        start = (step * args.batch * args.world) % (n - args.batch * args.world)
        lo = start + rank * args.batch
        xb, yb = xtr[lo:lo + args.batch], ytr[lo:lo + args.batch]
        ts = time.monotonic()
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()  # DDP all-reduces the gradients here
        opt.step()
        step_times.append(time.monotonic() - ts)
        if rank == 0:
            say(f"step {step} loss {loss.item():.6f}")
        if args.step_sleep_ms:
            time.sleep(args.step_sleep_ms / 1000.0)
    elapsed = time.monotonic() - t0
    with torch.no_grad():
        acc = (model(xte).argmax(1) == yte).float().mean().item()
    status, calls = "gloo", 0
    if args.backend == "ina":
        pg = ina_torch.backend()
        status, calls = pg.fabric_status, pg.fabric_calls
    say(f"rank {rank} backend {args.backend} fabric_calls {calls} status: {status}")
    say(f"rank {rank} params sha256={fingerprint(model)}")
    if rank == 0:
        step_times = sorted(step_times[2:] if len(step_times) > 4 else step_times)
        say(f"accuracy {acc:.4f}")
        say(f"time {elapsed:.3f} s for {args.steps} steps, median step "
              f"{1000 * step_times[len(step_times) // 2]:.2f} ms (steps after the first 2)")
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=("ina", "gloo"), default="ina")
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--steps", type=int, default=80)
    p.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--port", type=int, default=29517, help="rendezvous (env://) TCP port")
    p.add_argument("--switch", default=os.environ.get("INA_SWITCH", ""),
                   help="fabric host:port (default INA_SWITCH)")
    p.add_argument("--progress-timeout-ms", type=int, default=0,
                   help="a fabric call with no progress this long fails (0: INA_* default)")
    p.add_argument("--step-sleep-ms", type=int, default=0, help="pause after each step")
    p.add_argument("--rank", type=int, default=-1,
                   help="run only this rank in this process (one launch per rank, e.g. one per "
                        "network namespace); default: spawn all --world ranks here")
    p.add_argument("--master-addr", default="127.0.0.1", help="rank 0's address (env://)")
    args = p.parse_args()
    if args.rank >= 0:
        worker(args.rank, args)
    else:
        mp.spawn(worker, args=(args,), nprocs=args.world, join=True)


if __name__ == "__main__":
    sys.exit(main())
