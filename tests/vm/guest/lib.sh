# Helpers sourced by the guest tests (not a test itself: the runner runs [0-9]*.sh only).
wait_listen() {  # wait_listen PORT PID: until a TCP listener on PORT (PID must stay alive), <= 30 s
  local i
  for i in $(seq 300); do
    ss -ltn 2>/dev/null | grep -q ":$1 " && return 0
    kill -0 $2 2>/dev/null || { echo "server (pid $2) exited before listening on $1"; return 1; }
    sleep 0.1
  done
  echo "nothing listens on port $1 after 30 s"; return 1
}
