"""python3 -m ina_torch.run [torchrun's arguments]: torchrun, also where torch has no libuv.

torch 2.x's TCPStore serves through libuv by default, and a torch built without it (Debian 13's
2.6) fails with "use_libuv was requested but PyTorch was build without libuv support". env:// and
tcp:// take USE_LIBUV=0; torchrun's own rendezvous stores (static, c10d) do not. With USE_LIBUV=0
in the environment this launcher makes those stores without libuv, then runs torchrun's main()
unchanged; the workers inherit USE_LIBUV=0, and `import ina_torch` there does the same for the
store that reaches this agent's. Otherwise it is torchrun. docs/pytorch.md, "Which torch".
"""
import os
import sys

import ina_torch


def _without_libuv():
    """Points torchrun's rendezvous stores at TCPStore(..., use_libuv=False)."""
    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend, dynamic_rendezvous
    from torch.distributed.elastic.rendezvous import static_tcp_rendezvous
    store = ina_torch._tcp_store_without_libuv
    for module in (static_tcp_rendezvous, c10d_rendezvous_backend):
        if hasattr(module, "TCPStore"):
            module.TCPStore = store
    handler = getattr(dynamic_rendezvous, "DynamicRendezvousHandler", None)
    if handler is not None and hasattr(handler, "_create_tcp_store_server"):
        handler._create_tcp_store_server = lambda self, addr, port: store(
            host_name=addr, port=port, is_master=True, multi_tenant=True)


def main():
    if os.environ.get("USE_LIBUV") == "0" and ina_torch._libuv_choosable():
        _without_libuv()
    from torch.distributed.run import main as torchrun
    sys.argv[0] = "torchrun"
    return torchrun()


if __name__ == "__main__":
    sys.exit(main())
