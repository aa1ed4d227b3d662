"""ina_torch: the torch.distributed backend "ina" (in-network all-reduce, docs/pytorch.md).

    import ina_torch                      # registers the backend
    dist.init_process_group("ina", ...)   # env://, tcp://, file://; torchrun or mp.spawn

all_reduce SUM/AVG of float32/int32 (float16/bfloat16/float64 through float32) goes through the
fabric at INA_SWITCH (host:port); everything else through a Gloo group the backend makes over the
same store. Options for the groups created after the call: configure(switch="h:p",
progress_timeout_ms=..., join_timeout_ms=..., k=..., window=..., fallback=True|False).
"""
import datetime

import torch.distributed as dist  # must come before the extension (it binds ProcessGroup)

from . import _C

ProcessGroupIna = _C.ProcessGroupIna
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


def _create(store, rank, size, timeout):
    kw = dict(_options)
    if "fallback" in kw:
        kw["fallback"] = 1 if kw["fallback"] else 0
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    return _C.ProcessGroupIna(store, rank, size, timeout, **kw)


dist.Backend.register_backend("ina", _create)
