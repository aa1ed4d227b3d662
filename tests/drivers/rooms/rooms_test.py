#!/usr/bin/env python3
"""The include rules of the rooms (docs/architecture.md, "Layers"; drivers/README.md): each
folder's C++ and CUDA files include no header of a room on the other side.

usage: rooms_test.py SOURCE_DIR   (exit 0: every rule holds; 1: the offending lines are listed)
"""
import pathlib
import re
import sys

# folder -> include prefixes it must never use (the worker side and the switch side meet only on
# the wire, proto/, and in the packet I/O layer, net/).
RULES = {
    "drivers/fabric": ("ina/host/", "ina/gpu/"),
    "drivers/gpu": ("ina/dp/", "ina/drv/"),
    "host": ("ina/dp/", "ina/drv/", "ina/gpu/", "ina/sim/"),
    "plugins": ("ina/dp/", "ina/drv/", "ina/sim/"),
    "dataplane": ("ina/host/", "ina/gpu/", "ina/drv/", "ina/sim/"),
    "sim": ("ina/host/", "ina/gpu/"),
    "net": ("ina/host/", "ina/dp/", "ina/drv/", "ina/gpu/", "ina/sim/"),
    "proto": ("ina/host/", "ina/dp/", "ina/drv/", "ina/gpu/", "ina/sim/", "ina/net/"),
    "base": ("ina/host/", "ina/dp/", "ina/drv/", "ina/gpu/", "ina/sim/", "ina/net/", "ina/proto/"),
}
SUFFIXES = {".h", ".cc", ".cu", ".cuh", ".cpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')


def violations(root: pathlib.Path):
    for folder, banned in RULES.items():
        base = root / folder
        if not base.is_dir():
            yield f"{folder}: no such folder (the rules name it)"
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix not in SUFFIXES or "third_party" in path.parts:
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(line)
                if m and m.group(1).startswith(banned):
                    yield f"{path.relative_to(root)}:{n}: includes {m.group(1)} ({folder} may not)"


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    bad = list(violations(pathlib.Path(sys.argv[1])))
    for v in bad:
        print(v)
    print(f"rooms_test: {len(RULES)} folders checked, {len(bad)} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
