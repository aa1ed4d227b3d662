"""ina_torch: the torch.distributed backend "ina" (in-network all-reduce, docs/pytorch.md).

    import ina_torch                      # registers the backend
    dist.init_process_group("ina", ...)   # env://, tcp://, file://; torchrun or mp.spawn

all_reduce SUM/AVG of float32/int32 (float16/bfloat16/float64 through float32) goes through the
fabric at INA_SWITCH (host:port); everything else through a Gloo group the backend makes over the
same store. Options for the groups created after the call: configure(switch="h:p",
progress_timeout_ms=..., join_timeout_ms=..., k=..., window=..., fallback=True|False).
backend(group) is the group's ProcessGroupIna (fabric_status, fabric_calls, metrics(), ...).

torch 2.x: the backend is a c10d::Backend registered for "cpu" and "cuda" (torch's ProcessGroup
dispatches to it); torch 1.13: it is the ProcessGroup (docs/pytorch.md, "Which torch").
"""
import datetime
import importlib
import os

import torch
import torch.distributed as dist  # must come before the extension (it binds ProcessGroup)

from . import _C

ProcessGroupIna = _C.ProcessGroupIna
# True on torch 2.x (ProcessGroupIna is a c10d::Backend), False on 1.13 (it is a ProcessGroup).
IS_BACKEND = _C.IS_BACKEND
# True when this build all-reduces CUDA tensors through the fabric (built with drivers/gpu's CUDA
# memory domain); they also need a torch with CUDA. docs/pytorch.md, "CUDA tensors".
CUDA_PATH_BUILT = _C.cuda_path_built()

_options = {}
_KNOWN = ("switch", "progress_timeout_ms", "join_timeout_ms", "k", "window", "fallback")


def configure(**options):
    """Sets backend options for process groups created from now on (None clears one)."""
    for key, value in options.items():
        if key not in _KNOWN:
            raise ValueError(f"ina_torch.configure: unknown option {key!r} (known: {_KNOWN})")
        if value is None:
            _options.pop(key, None)
        else:
            _options[key] = value


def backend(group=None):
    """The ProcessGroupIna behind `group` (default: the default group)."""
    g = group if group is not None else dist.distributed_c10d._get_default_group()
    b = g._get_backend(torch.device("cpu")) if IS_BACKEND else g
    if not isinstance(b, ProcessGroupIna):
        raise ValueError(f"ina_torch.backend: the group's backend is {dist.get_backend(g)!r}, "
                         "not 'ina'")
    return b


def _gloo(store, prefix, rank, size, timeout):
    # torch's own binding (GLOO_SOCKET_IFNAME is honoured there): pip torch ships no Gloo headers.
    gloo = dist.distributed_c10d.ProcessGroupGloo
    return gloo(dist.PrefixStore(prefix, store), rank, size, timeout)


def _create(store, rank, size, timeout):
    kw = dict(_options)
    if "fallback" in kw:
        kw["fallback"] = 1 if kw["fallback"] else 0
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    return _C.ProcessGroupIna(store, rank, size, timeout,
                              _gloo(store, "ina/gloo", rank, size, timeout),
                              _gloo(store, "ina/gloo_recovery", rank, size, timeout), **kw)


def _tcp_store_without_libuv(*args, **kwargs):
    """torch.distributed.TCPStore(..., use_libuv=False)."""
    kwargs["use_libuv"] = False
    return dist.TCPStore(*args, **kwargs)


def _libuv_choosable():
    """Whether this torch's TCPStore takes use_libuv (2.x)."""
    return "use_libuv" in (dist.TCPStore.__init__.__doc__ or "")


# USE_LIBUV=0 (a torch without libuv: Debian 13's 2.6) is honoured by env:// and tcp://, but not
# by the store a worker of torchrun makes to reach its agent's (torch.distributed.rendezvous's
# "agent store" client): with USE_LIBUV=0 that one is made without libuv too. ina_torch.run does
# the same for torchrun's own stores. docs/pytorch.md, "Which torch".
if os.environ.get("USE_LIBUV") == "0" and _libuv_choosable():
    # The module: the attribute torch.distributed.rendezvous is a function of the same name.
    _rendezvous = importlib.import_module("torch.distributed.rendezvous")
    if hasattr(_rendezvous, "TCPStore"):
        _rendezvous.TCPStore = _tcp_store_without_libuv

if IS_BACKEND:
    # "cuda" whatever this build's CUDA path: CUDA tensors that the fabric cannot take are refused
    # with the reason, and the ops that go to Gloo take them where torch has CUDA.
    dist.Backend.register_backend("ina", _create, devices=["cpu", "cuda"])
else:
    dist.Backend.register_backend("ina", _create)
