#!/bin/bash
# Slurm Prolog: wirecheck's quick level on this node before each job (or its recent pass, when nothing changed
# since: validate --trust-recent); a node that fails a check is drained
# with the failed check as its reason, and never resumed by this script, but for a drain of its own beyond the
# fleet guard's share, taken back seconds after it was made (hook_confirm_drain): then the job runs.
#
#   slurm.conf:  Prolog=/opt/wirecheck/scripts/slurm/wirecheck-prolog.sh   (this file, in the install, as root's)
#                PrologFlags=Alloc          # at allocation: salloc and srun allocations are checked too
#                PrologEpilogTimeout=180    # above PROLOG_TIMEOUT (120 s): a prolog Slurm kills drains the node
#   settings:    wirecheck-drain.conf beside this file (WIRECHECK, RECORDS, ARGS such as --profile, waits)
#
# What each outcome does (Slurm's prolog contract: a non-zero exit drains the node and requeues the job):
#   passed           exit 0: the job runs.
#   unhealthy        a check failed on this node's GPUs, or NVML failed where a driver is installed:
#                    `scontrol update NodeName=<node> State=DRAIN Reason="wirecheck: <check> <where> <measured> < <limit>"`,
#                    then exit 1: Slurm requeues a batch job in a held state (`scontrol release JOBID`, or
#                    SchedulerParameters=nohold_on_prolog_fail to let it go to another node at once) and fails
#                    an interactive allocation. Slurm's own reason ("Prolog error") does not replace ours.
#   flaky            a check failed, then passed its one re-test (node-state --hook): recorded in
#                    RECORDS/drain-events.jsonl, exit 0, the job runs (the third in a day drains).
#   guard holds      it should drain, but more than the guard's share of the partition was drained by wirecheck
#                    within its window (or RECORDS/guard is there), or its drain was one too many of drains
#                    made in the same second (taken back): not drained, the node's comment and syslog say GUARD,
#                    exit 0, until a person removes the guard file.
#   replace a GPU    drained like unhealthy, the reason "wirecheck: replace the GPU ...; bundle <archive>".
#   not checked      node busy (another wirecheck run held the GPUs past PROLOG_WAIT, 60 s), a simulation, a
#                    fault of the harness (74: a full or read-only disk under RECORDS; 70: a crash of wirecheck), a
#                    usage or internal error, a timeout without a failed check, a node without the NVIDIA kernel
#                    driver: exit 0, the job runs unchecked and the reason goes to syslog (tag wirecheck-prolog).
#                    Only exit 0 keeps such a node in service: a prolog's non-zero exit always drains it.
# A failure is re-tested before it drains (docs/fleet.md, "What happens on a failure, step by step").
# The run's record and output: RECORDS/prolog.jsonl and prolog.log; an unhealthy run's stay as
# prolog-unhealthy-<UTC>.jsonl/.log. Runs as root: see docs/running-as-root.md.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin  # root's: no folder a user writes
here=$(dirname -- "$(readlink -f -- "$0")")
lib=$(readlink -f -- "$here/../lib/wirecheck-hook.sh")
# Sourced code runs as root: only a file that it, and every folder above it, no one but root (or this user)
# can change (a sticky folder such as /tmp above it is allowed).
p=$lib
while :; do
  [ -n "$(find -P "$p" -maxdepth 0 \( -uid 0 -o -uid "$(id -u)" \) \( ! -perm /022 -o \( -type d -perm -1000 \) \) 2>/dev/null)" ] \
    || { echo "wirecheck-prolog: $p is missing or could be changed by another user: not checked, the job runs" >&2; exit 0; }
  [ "$p" = / ] && break
  p=$(dirname -- "$p")
done
. "$lib"

hook_setup "$here/wirecheck-drain.conf" prolog 60s 120 || { hook_log "$HOOK_LINE; the job runs"; exit 0; }
node=$(hook_node)
# A pass of this node within prolog.trust_window (thresholds.yaml, 6 h) stands for the run while NVML and the
# kernel log show nothing changed since (docs/commands.md, the trusted path): about a second, no pytest.
HOOK_VALIDATE_ARGS=(--trust-recent)
# The job's GPUs (Slurm's SLURM_JOB_GPUS): on a node shared with other jobs, their processes and GPUs are theirs,
# and a check of every GPU would fail this one on them (no_foreign_processes) and drain a healthy node. Without
# it (a job without GPUs) a node whose GPUs another job uses is not checked, as the health check does.
HOOK_GPUS=$(hook_job_gpus "${SLURM_JOB_GPUS:-}")
if [ -z "$HOOK_GPUS" ]; then
  in_use=$(hook_gpus_in_use)
  [ "${in_use:-0}" = 0 ] || { hook_log "$node: $in_use process(es) on the GPUs and no SLURM_JOB_GPUS: not checked, the job runs"; exit 0; }
fi
hook_check
hook_act "$node" || exit 1
exit 0
