#!/bin/sh
# mpirun's remote-shell agent for scripts/testbed.sh: "hosts" are network namespaces. mpirun calls
#   netns_agent.sh [ssh-style options] HOST COMMAND...
# and this runs COMMAND (a shell command line, as ssh would) inside namespace HOST, with its own
# UTS namespace whose hostname is HOST, so the daemons on different "hosts" tell themselves apart.
while [ $# -gt 0 ]; do
  case $1 in
    -*) shift ;;  # ssh options such as -x
    *) break ;;
  esac
done
host=$1
shift
exec ip netns exec "$host" unshare --uts /bin/sh -c 'hostname "$0" && exec /bin/sh -c "$1"' \
  "$host" "$*"
