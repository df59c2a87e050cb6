#!/bin/bash
# Slurm HealthCheckProgram: wirecheck's quick level on an idle node at an interval (and when slurmd starts);
# a node that fails a check is drained with the failed check as its reason, and never resumed by this
# script (LBNL NHC's place, for the GPUs), but for a drain of its own beyond the fleet guard's share, taken
# back seconds after it was made (hook_confirm_drain).
#
#   slurm.conf:  HealthCheckProgram=/opt/wirecheck/scripts/slurm/wirecheck-healthcheck.sh
#                HealthCheckInterval=3600
#                HealthCheckNodeState=IDLE,CYCLE   # every GPU for its seconds: never beside a job; CYCLE spreads
#                                                  # the nodes over the interval, so the fleet guard sees the drains
#                                                  # of a push that breaks every node (all at once, none is held)
#   settings:    wirecheck-drain.conf beside this file (HEALTHCHECK_TIMEOUT 50 s: Slurm kills the program at 60 s)
#
#   passed        exit 0.
#   unhealthy     a check failed on this node's GPUs, or NVML failed where a driver is installed: the node is
#                 drained, `Reason="wirecheck: <check> <where> <measured> < <limit>"`; exit 1 (slurmd logs it).
#   flaky         failed, then passed its one re-test: recorded (RECORDS/drain-events.jsonl), exit 0.
#   guard holds   too many of the partition drained at once (or RECORDS/guard is there): not drained (or its
#                 drain, one too many of drains made in the same second, taken back), the node's comment says
#                 GUARD, exit 0, until a person removes the guard file.
#   replace a GPU drained, the reason "wirecheck: replace the GPU ...; bundle <archive>", exit 1.
#   not checked   the node is drained or down already (left as it is, its reason too), processes are on the
#                 GPUs, node busy (another wirecheck run holds them: HEALTHCHECK_WAIT 0 s), a simulation, a fault
#                 of the harness (74: a full or read-only disk under RECORDS; 70: a crash of wirecheck), a usage
#                 or internal error, a timeout without a failed check: exit 0, the reason goes to syslog.
# The run's record and output: RECORDS/healthcheck.jsonl and .log. Runs as root: docs/running-as-root.md.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin  # root's: no folder a user writes
here=$(dirname -- "$(readlink -f -- "$0")")
lib=$(readlink -f -- "$here/../lib/wirecheck-hook.sh")
# Sourced code runs as root: only a file that it, and every folder above it, no one but root (or this user)
# can change (a sticky folder such as /tmp above it is allowed).
p=$lib
while :; do
  [ -n "$(find -P "$p" -maxdepth 0 \( -uid 0 -o -uid "$(id -u)" \) \( ! -perm /022 -o \( -type d -perm -1000 \) \) 2>/dev/null)" ] \
    || { echo "wirecheck-healthcheck: $p is missing or could be changed by another user: not checked" >&2; exit 0; }
  [ "$p" = / ] && break
  p=$(dirname -- "$p")
done
. "$lib"

hook_setup "$here/wirecheck-drain.conf" healthcheck 0s 50 || { hook_log "$HOOK_LINE"; exit 0; }
node=$(hook_node)
state=$(hook_node_state "$node")
case $state in
  *DRAIN*|DOWN*|*+DOWN*) hook_log "$node is $state: not checked (a drained node stays drained until a person resumes it)"; exit 0 ;;
esac
in_use=$(hook_gpus_in_use)
[ "${in_use:-0}" = 0 ] || { hook_log "$node: $in_use process(es) on the GPUs: not checked"; exit 0; }
hook_check
hook_act "$node" || exit 1
exit 0
