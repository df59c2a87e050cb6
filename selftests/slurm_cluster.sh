#!/usr/bin/env bash
# A Slurm cluster of several hosts on this one machine, for one command (its batch jobs), then gone:
#   unshare --mount --net --uts --propagation private bash slurm_cluster.sh DIR -- COMMAND...
# DIR holds slurm.conf, hosts and nodes ("NAME ADDRESS" per line; test_slurm_e2e.py writes them).
#
# Each node is a host of its own: a network namespace with its own address on a bridge, its own
# hostname, its own slurmd. The controller and COMMAND run in the namespace around them (the site's
# network), at the bridge's address. Everything lives inside the private namespaces unshare made:
# the named network namespaces on a private /run/netns, DIR/hosts over /etc/hosts (node names resolve
# to their addresses, for torchrun's rendezvous and gloo alike), the bridge and its 10.77.0.0/24
# addresses. Nothing of the machine's own network, hosts file or hostname is touched.
# Exit status: the command's; 90-94 when the cluster could not be built (the message says which step).
set -uo pipefail
dir=$1; shift
[ "$1" = "--" ] && shift
export SLURM_CONF=$dir/slurm.conf

fail() { echo "slurm_cluster: $2" >&2; exit "$1"; }
stop() {
  for pid_file in "$dir"/*.pid; do
    [ -f "$pid_file" ] && kill "$(cat "$pid_file")" 2>/dev/null
  done
}
trap stop EXIT

mount --bind "$dir/hosts" /etc/hosts || fail 90 "cannot put $dir/hosts over /etc/hosts"
mkdir -p /run/netns && mount -t tmpfs wirecheck-netns /run/netns || fail 90 "cannot mount a private /run/netns"
hostname wc-ctl
ip link set lo up && ip link add br0 type bridge && ip addr add 10.77.0.1/24 dev br0 && ip link set br0 up \
  || fail 91 "cannot make the bridge br0"
nodes=()
while read -r node address; do
  [ -n "$node" ] || continue
  nodes+=("$node")
  ip netns add "$node" && ip link add "v-$node" type veth peer name eth0 netns "$node" \
    && ip link set "v-$node" master br0 up && ip -n "$node" addr add "$address/24" dev eth0 \
    && ip -n "$node" link set eth0 up && ip -n "$node" link set lo up || fail 92 "cannot wire $node ($address)"
done <"$dir/nodes"

slurmctld -f "$SLURM_CONF" -i || fail 93 "slurmctld did not start (see $dir/slurmctld.log)"
for node in "${nodes[@]}"; do
  # slurmd daemonizes inside the node's namespaces: every task it starts is on that host. nsenter, not
  # `ip netns exec`, which mounts a sysfs of its own where slurmd then finds no /sys/fs/cgroup.
  nsenter --net="/run/netns/$node" unshare --uts bash -c "hostname $node && exec slurmd -f $SLURM_CONF -N $node" \
    || fail 94 "slurmd on $node did not start (see $dir/slurmd-$node.log)"
done
for _ in $(seq 150); do  # up to 30 s for every node to register as idle
  idle=$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)
  [ "$idle" -ge "${#nodes[@]}" ] && break
  sleep 0.2
done
echo "slurm_cluster: $idle of ${#nodes[@]} nodes idle after ${SECONDS} s" >&2
"$@"
