#!/bin/bash
# node-problem-detector custom plugin: wirecheck's quick level on this node's GPUs, as NPD's plugin protocol
# wants it: one short line on stdout (at most MAX_LENGTH, 80: NPD's default max_output_length) and
#   exit 0  OK       every selected check passed on this node's GPUs;
#   exit 1  NonOK    a check failed, or NVML failed where a driver is installed (a broken driver): the line is
#                    the reason, "wirecheck: <check> <where> <measured> < <limit>";
#   (a failure is re-tested first: flaky is OK with the flaky line; a GPU to replace is NonOK; the fleet
#   guard holding, too many of the cluster's nodes failed at once, is Unknown with the GUARD line)
#   exit 2  Unknown  not checked: processes on the GPUs, node busy (another wirecheck run holds them), a
#                    simulation, a fault of the harness (74: a full disk; 70: a crash of wirecheck), a usage or
#                    internal error, a timeout without a failed check.
# NPD turns these into the node condition WirecheckFailed (False, True, Unknown: wirecheck-monitor.json);
# draining or tainting a node on that condition is for a remediation controller (see the README).
#
# Runs in the DaemonSet of daemonset.yaml, from the image's install (/opt/wirecheck), as root: settings in
# wirecheck-plugin.conf beside this file; the run's record and output in RECORDS/plugin.jsonl and .log.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin  # root's: no folder a user writes
here=$(dirname -- "$(readlink -f -- "$0")")
lib=$(readlink -f -- "$here/../../lib/wirecheck-hook.sh")
# Sourced code runs as root: only a file that it, and every folder above it, no one but root (or this user)
# can change (a sticky folder such as /tmp above it is allowed).
p=$lib
while :; do
  [ -n "$(find -P "$p" -maxdepth 0 \( -uid 0 -o -uid "$(id -u)" \) \( ! -perm /022 -o \( -type d -perm -1000 \) \) 2>/dev/null)" ] \
    || { echo "wirecheck: not checked: ${p:0:40} could be changed by another user"; exit 2; }
  [ "$p" = / ] && break
  p=$(dirname -- "$p")
done
. "$lib"

say() {  # STATE LINE: NPD's protocol, one line
  local max=$HOOK_MAX_LENGTH
  # a bad MAX_LENGTH setting is said by hook_setup, in a line it must not break or cut to nothing
  [[ $max =~ ^[0-9]+$ ]] && [ "$max" -ge 20 ] || max=80
  echo "${2:0:$max}"
  exit "$1"
}
HOOK_MAX_LENGTH=80
hook_setup "$here/wirecheck-plugin.conf" plugin 0s 75 || say 2 "$HOOK_LINE"
in_use=$(hook_gpus_in_use)
[ "${in_use:-0}" = 0 ] || say 2 "wirecheck: not checked: $in_use process(es) on the GPUs"
hook_check
# NPD's three states: flaky is OK (recorded, not a condition), the guard's hold is Unknown (no controller
# drains on it), a GPU to replace is NonOK.
case $HOOK_STATE in
  30) say 0 "$HOOK_LINE" ;;
  31) say 2 "$HOOK_LINE" ;;
  32) say 1 "$HOOK_LINE" ;;
  *) say "$HOOK_STATE" "$HOOK_LINE" ;;
esac
