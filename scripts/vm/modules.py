#!/usr/bin/env python3
"""modules.py MODDIR NAME...: prints the .ko paths for NAMEs and their dependencies, dependencies
first (read from each module's modinfo "depends=" string: Debian's kernel .deb has no modules.dep
until depmod runs at install, and this harness never installs it)."""
import os
import sys


def main():
    index = {}
    for root, _, files in os.walk(sys.argv[1]):
        for f in files:
            if f.endswith('.ko'):
                index[f[:-3].replace('-', '_')] = os.path.join(root, f)
    order, seen = [], set()

    def visit(name):
        name = name.replace('-', '_')
        if name in seen:
            return
        seen.add(name)
        if name not in index:
            sys.exit(f'modules.py: module {name} not in {sys.argv[1]}')
        data = open(index[name], 'rb').read()
        i = data.find(b'\0depends=')
        if i >= 0:
            for dep in data[i + 9:data.index(b'\0', i + 1)].decode().split(','):
                if dep:
                    visit(dep)
        order.append(index[name])

    for m in sys.argv[2:]:
        visit(m)
    print('\n'.join(order))


main()
