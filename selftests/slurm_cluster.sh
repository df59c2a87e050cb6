#!/usr/bin/env bash
# A Slurm cluster of several nodes on this one host, for one command (its batch jobs), then gone:
#   unshare --mount --propagation private bash slurm_cluster.sh DIR NODE... -- COMMAND...
# DIR holds slurm.conf and hosts (test_slurm_e2e.py writes them). Run in a private mount namespace so
# that DIR/hosts can stand in for /etc/hosts: the node names resolve (torchrun's rendezvous host is
# the job's first node) for the daemons and every task they start, and for nothing else on the machine.
# Exit status: the command's.
set -uo pipefail
dir=$1; shift
nodes=()
while [ "$1" != "--" ]; do nodes+=("$1"); shift; done
shift
mount --bind "$dir/hosts" /etc/hosts || exit 90
export SLURM_CONF=$dir/slurm.conf

stop() {
  for pid_file in "$dir"/*.pid; do
    [ -f "$pid_file" ] && kill "$(cat "$pid_file")" 2>/dev/null
  done
}
trap stop EXIT

slurmctld -f "$SLURM_CONF" -i || exit 91
for node in "${nodes[@]}"; do slurmd -f "$SLURM_CONF" -N "$node" || exit 92; done
for _ in $(seq 150); do  # up to 30 s for every node to register as idle
  idle=$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)
  [ "$idle" -ge "${#nodes[@]}" ] && break
  sleep 0.2
done
echo "slurm_cluster: $idle of ${#nodes[@]} nodes idle after ${SECONDS} s" >&2
"$@"
