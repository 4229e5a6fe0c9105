# Sourced by pg-cluster.sh and pgbouncer.sh: loopback port helpers. The
# sourcing script defines die().

# True when something accepts connections on 127.0.0.1:$1.
port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Prints a port nothing listens on, below the kernel's ephemeral range
# (ip_local_port_range, 32768-60999 by default): a port in that range may be
# the local end of some outgoing connection, which refuses a connect test
# but makes a server's bind() fail with "Address already in use".
pick_port() {
  local port low=32768 range
  if range=$(cat /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null); then
    low=${range%%[[:space:]]*}
  fi
  ((low > 11000)) || low=32768
  for _ in $(seq 1 200); do
    port=$((10000 + RANDOM % (low - 10000)))
    if ! port_in_use "$port"; then
      echo "$port"
      return
    fi
  done
  die "no free port found"
}
