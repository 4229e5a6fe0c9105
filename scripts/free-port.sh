# Sourced by pg-cluster.sh and pgbouncer.sh: loopback port helpers. The
# sourcing script defines die().

# True when something accepts connections on 127.0.0.1:$1.
port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Prints a port nothing listens on (tried at random in 20000-59999).
pick_port() {
  local port
  for _ in $(seq 1 200); do
    port=$((20000 + RANDOM % 40000))
    if ! port_in_use "$port"; then
      echo "$port"
      return
    fi
  done
  die "no free port found"
}
