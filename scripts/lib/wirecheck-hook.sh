# wirecheck's hooks that act on a verdict as root, shared: scripts/slurm/wirecheck-prolog.sh,
# scripts/slurm/wirecheck-healthcheck.sh and scripts/k8s/node-problem-detector/wirecheck-plugin.sh.
# Sourced (never run) by them, after they checked that only root can change it (docs/running-as-root.md).
#
#   hook_setup CONF MODE   settings from CONF, root-safety checks; on a problem: HOOK_STATE=2 (unknown)
#   hook_check             runs `wirecheck validate --level quick` once (with HOOK_VALIDATE_ARGS: the prolog's
#                          --trust-recent, for that first run only), then `wirecheck node-state --hook`, which
#                          re-runs the failed tests once and applies the drain rules; it sets HOOK_STATE and
#                          HOOK_LINE (one ASCII line; when draining, the reason `wirecheck: <check> <where>
#                          <measured> < <limit>`, or the diagnosed culprit). HOOK_STATE (wirecheck.core.exit_codes):
#                            0 healthy, 1 drain, 2 unknown (act on nothing), 30 flaky (failed, passed its re-test:
#                            not drained), 31 the fleet guard holds (not drained, the line says until when),
#                            32 drain and replace a GPU (the evidence bundle's path ends the line)
#   hook_drain NODE LINE   drains a Slurm node with LINE as the reason, unless it is drained already
#   hook_confirm_drain NODE  after its own drain: takes it back where it was one too many (the fleet guard)
#   hook_comment NODE LINE sets a Slurm node's comment (the guard's hold: the node is not drained)
#   hook_log LINE          syslog (tag wirecheck-MODE) and stderr
#
# The decision is Python's (`wirecheck node-state`, tested in selftests/test_node_state.py): these
# functions only run the check where it is safe to and hand its line to the scheduler.
# CONF is read, never sourced: KEY=VALUE lines, `#` comments, only the keys of HOOK_KEYS.

HOOK_KEYS=" WIRECHECK RECORDS ARGS ENV GPU_NODE MAX_LENGTH SCONTROL SLURM_CONF PROLOG_WAIT PROLOG_TIMEOUT "
HOOK_KEYS+="HEALTHCHECK_WAIT HEALTHCHECK_TIMEOUT PLUGIN_WAIT PLUGIN_TIMEOUT "
HOOK_KEYS+="DIAGNOSE BUG_REPORT GUARD_FILE PROMETHEUS SINFO KUBECTL "
HOOK_STATE=2
HOOK_LINE=
# Of the hook's time limit (*_TIMEOUT), what node-state keeps for its own work after the runs: the guard's reads
# (5 s each at most), the events and gauges, and the drain's confirmation (hook_confirm_drain). The lock's wait, the run and the re-test share the rest, so the
# hook ends within its limit (slurmd kills a HealthCheckProgram at 60 s; a prolog it kills drains the node).
HOOK_RESERVE=25  # node-state's decision (15 s) and, after a Slurm drain, its confirmation (10 s)
HOOK_VALIDATE_ARGS=()  # the hook's own validate options, set by the hook after sourcing (the prolog: --trust-recent)
declare -A HOOK_CONF=()

hook_log() {
  command -v logger >/dev/null 2>&1 && logger -t "wirecheck-$HOOK_MODE" -- "$1"
  echo "wirecheck-$HOOK_MODE: $1" >&2
}

hook_unknown() {  # MESSAGE: nothing checked, nothing to act on
  HOOK_STATE=2
  HOOK_LINE="wirecheck: $1"
  return 1
}

# hook_untrusted PATH...: the first file or folder in a PATH, or folder above one, that a user other than root
# (or the user running this) could have changed, with its owner and mode; nothing when there is none. A sticky
# folder such as /tmp is allowed above a PATH, never inside one (scripts/slurm/fleet-acceptance.sbatch's rule).
hook_untrusted() {
  local top dir me
  me=$(id -u)
  for top in "$@"; do
    dir=$(readlink -f -- "$top") || { echo "$top (missing)"; return; }
    [ -e "$dir" ] || { echo "$top (missing)"; return; }
    find -P "$dir" \( \( ! -uid 0 ! -uid "$me" \) -o \( ! -type l -perm /022 \) \) -printf '%p (owner %u, mode %m)\n' -quit
    while [ "$dir" != / ]; do
      dir=$(dirname -- "$dir")
      find "$dir" -maxdepth 0 \( \( ! -uid 0 ! -uid "$me" \) -o \( -perm /022 ! -perm -1000 \) \) \
        -printf '%p (owner %u, mode %m)\n'
    done
  done | head -n 1
}

hook_read_conf() {  # CONF
  local conf=$1 raw key value n=0 bad
  [ -e "$conf" ] || return 0
  bad=$(hook_untrusted "$conf")
  [ -z "$bad" ] || { hook_unknown "cannot run: $bad could be changed by another user, who would choose what root runs; make $conf root's and writable by root only"; return 1; }
  while IFS= read -r raw || [ -n "$raw" ]; do
    n=$((n + 1))
    raw=${raw#"${raw%%[![:space:]]*}"}  # leading blanks
    case $raw in ''|'#'*) continue ;; esac
    key=${raw%%=*}
    value=${raw#*=}
    value=${value%"${value##*[![:space:]]}"}  # trailing blanks
    if [ "$key" = "$raw" ] || ! [[ $key =~ ^[A-Z_]+$ && $HOOK_KEYS == *" $key "* ]]; then
      hook_unknown "cannot run: $conf:$n: '${raw:0:40}' is not KEY=VALUE with a known key (keys:$HOOK_KEYS)"
      return 1
    fi
    HOOK_CONF[$key]=$value
  done <"$conf"
}

hook_get() {  # KEY DEFAULT
  if [ -n "${HOOK_CONF[$1]+set}" ]; then echo "${HOOK_CONF[$1]}"; else echo "$2"; fi
}

# hook_setup CONF MODE [DEFAULT_WAIT DEFAULT_TIMEOUT]: MODE is prolog, healthcheck or plugin.
hook_setup() {
  local conf=$1 install upper bad
  HOOK_MODE=$2
  upper=$(echo "$HOOK_MODE" | tr '[:lower:]' '[:upper:]')
  umask 022
  hook_read_conf "$conf" || return 1
  install=$(readlink -f -- "${BASH_SOURCE[0]%/*}/../..")  # the checkout that holds scripts/
  WIRECHECK=$(hook_get WIRECHECK "$install/.venv/bin/wirecheck")
  RECORDS=$(hook_get RECORDS /var/lib/wirecheck)
  RECORDS=${RECORDS//%n/$(hook_node)}  # %n: the node's name, as in Slurm's SlurmdSpoolDir (several slurmd on a host)
  HOOK_WAIT=$(hook_get "${upper}_WAIT" "${3:-0s}")
  HOOK_TIMEOUT=$(hook_get "${upper}_TIMEOUT" "${4:-60}")
  # slurmdbd keeps 255 bytes of a node's reason; node-problem-detector's max_output_length is 80 by default
  if [ "$HOOK_MODE" = plugin ]; then HOOK_MAX_LENGTH=$(hook_get MAX_LENGTH 80); else HOOK_MAX_LENGTH=$(hook_get MAX_LENGTH 255); fi
  HOOK_GPU_NODE=$(hook_get GPU_NODE auto)
  case $WIRECHECK in /*) ;; *) hook_unknown "cannot run: WIRECHECK=$WIRECHECK: give an absolute path"; return 1 ;; esac
  case $RECORDS in /*) ;; *) hook_unknown "cannot run: RECORDS=$RECORDS: give an absolute path"; return 1 ;; esac
  [[ $HOOK_TIMEOUT =~ ^[0-9]+$ ]] && [ "$HOOK_TIMEOUT" -ge $((HOOK_RESERVE + 5)) ] \
    || { hook_unknown "cannot run: ${upper}_TIMEOUT=$HOOK_TIMEOUT: give whole seconds, at least $((HOOK_RESERVE + 5))"; return 1; }
  # node-state refuses a line shorter than 20 characters: every decision would be its usage error, never a drain
  [[ $HOOK_MAX_LENGTH =~ ^[0-9]+$ ]] && [ "$HOOK_MAX_LENGTH" -ge 20 ] \
    || { hook_unknown "cannot run: MAX_LENGTH=$HOOK_MAX_LENGTH: give a number of characters, at least 20"; return 1; }
  [ -x "$WIRECHECK" ] || { hook_unknown "cannot run: WIRECHECK=$WIRECHECK is not an executable (set WIRECHECK in $conf)"; return 1; }
  # What root runs: the command, its venv, and the checkout around the venv when it is one (tests, thresholds).
  local trees=("$WIRECHECK") venv
  venv=$(dirname -- "$(dirname -- "$WIRECHECK")")
  if [ -f "$venv/pyvenv.cfg" ]; then
    trees+=("$venv")
    [ -f "$venv/../install.sh" ] && trees+=("$(dirname -- "$venv")")
  fi
  bad=$(hook_untrusted "${trees[@]}")
  [ -z "$bad" ] || { hook_unknown "cannot run: $bad could be changed by another user, who would choose what root runs; install wirecheck where only root can write"; return 1; }
  mkdir -p -m 0755 -- "$RECORDS" || { hook_unknown "cannot run: cannot make RECORDS=$RECORDS"; return 1; }
  bad=$(hook_untrusted "$RECORDS")
  [ -z "$bad" ] || { hook_unknown "cannot run: $bad could be changed by another user, who could redirect what root writes there; give RECORDS a folder only root can write"; return 1; }
  local slurm_conf
  slurm_conf=$(hook_get SLURM_CONF "")
  [ -z "$slurm_conf" ] || export SLURM_CONF=$slurm_conf  # scontrol's; HealthCheckProgram gets none from slurmd
  SCONTROL=$(hook_get SCONTROL "$(command -v scontrol)")
  case $SCONTROL in /*|'') ;; *) hook_unknown "cannot run: SCONTROL=$SCONTROL: give an absolute path"; return 1 ;; esac
  # The drain rules' options (wirecheck node-state --hook): the guard reads sinfo (Slurm) or kubectl (Kubernetes).
  if [ "$HOOK_MODE" = plugin ]; then HOOK_KIND=k8s; else HOOK_KIND=slurm; fi
  HOOK_RULES=(--hook "$HOOK_KIND" --node "$(hook_node)" --records "$RECORDS" --mode "$HOOK_MODE" --wirecheck "$WIRECHECK")
  local key value
  for key in DIAGNOSE BUG_REPORT; do
    value=$(hook_get "$key" no)
    case $value in
      yes) HOOK_RULES+=("--$(echo "$key" | tr '[:upper:]_' '[:lower:]-')") ;;
      no) ;;
      *) hook_unknown "cannot run: $key=$value: give yes or no"; return 1 ;;
    esac
  done
  for key in GUARD_FILE PROMETHEUS SINFO KUBECTL; do
    value=$(hook_get "$key" "")
    [ -n "$value" ] || continue
    case $value in /*) ;; *) hook_unknown "cannot run: $key=$value: give an absolute path"; return 1 ;; esac
    HOOK_RULES+=("--$(echo "$key" | tr '[:upper:]_' '[:lower:]-')" "$value")
  done
  return 0
}

# hook_gpu_node: the NVIDIA kernel driver shows on this machine, or an NVIDIA GPU sits on its PCI bus (a node
# whose module did not load after a kernel update is still a GPU node: validate names what is missing, exit 11).
HOOK_PCI=/sys/bus/pci/devices  # where the PCI functions are (a self-test points it at a folder of its own)
hook_gpu_node() {
  [ -e /proc/driver/nvidia ] || [ -e /dev/nvidiactl ] && return 0
  local dev vendor class
  for dev in "$HOOK_PCI"/*; do
    read -r vendor <"$dev/vendor" 2>/dev/null || continue
    read -r class <"$dev/class" 2>/dev/null || continue
    # NVIDIA (0x10de), a display controller: VGA (0x0300xx) or 3D (0x0302xx), as wirecheck.node.pci reads it
    [ "$vendor" = 0x10de ] && case $class in 0x0300*|0x0302*) return 0 ;; esac
  done
  return 1
}

# hook_gpus_in_use: the number of compute processes on the GPUs (another workload); empty when unknown (no
# nvidia-smi, or one that fails or hangs: a broken driver is validate's to name, never "in use").
HOOK_NVIDIA_SMI=nvidia-smi  # on the fixed PATH (a self-test points it at a fake)
hook_gpus_in_use() {
  command -v "$HOOK_NVIDIA_SMI" >/dev/null 2>&1 || return 0
  local pids
  pids=$(timeout --kill-after=5 20 "$HOOK_NVIDIA_SMI" --query-compute-apps=pid --format=csv,noheader 2>/dev/null) || return 0
  printf '%s\n' "$pids" | grep -c '^[[:space:]]*[0-9][0-9]*[[:space:]]*$'
}

HOOK_KEEP=20  # unhealthy records, outputs and replace bundles kept in RECORDS, each kind, newest first

hook_prune() {  # PATTERN KEEP: the files of RECORDS named PATTERN but the KEEP newest are removed
  find "$RECORDS" -maxdepth 1 -type f -name "$1" -printf '%T@ %p\n' 2>/dev/null | sort -rn | tail -n +"$(($2 + 1))" \
    | cut -d' ' -f2- | while IFS= read -r old; do rm -f -- "$old"; done
}

# hook_job_gpus IDS: Slurm's SLURM_JOB_GPUS (the job's GPUs, global ids: "0,1" or "0-3,6") as a
# CUDA_VISIBLE_DEVICES list; empty for anything else.
hook_job_gpus() {
  local part out=() i
  local -a parts
  [[ $1 =~ ^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$ ]] || return 0
  IFS=, read -r -a parts <<<"$1"
  for part in ${parts[@]+"${parts[@]}"}; do
    if [[ $part == *-* ]]; then
      for ((i = ${part%-*}; i <= ${part#*-}; i++)); do out+=("$i"); done
    else
      out+=("$part")
    fi
  done
  (IFS=,; echo "${out[*]}")
}

HOOK_GPUS=  # the GPUs this run validates (CUDA_VISIBLE_DEVICES), empty for all: the prolog's job's GPUs

hook_check() {
  local record=$RECORDS/$HOOK_MODE.jsonl output=$RECORDS/$HOOK_MODE.log code home word left said runs
  SECONDS=0
  runs=$((HOOK_TIMEOUT - HOOK_RESERVE))  # the lock's wait, the run and the re-test, together
  local -a env_vars=() args=() validate_args=()
  if [ "$HOOK_GPU_NODE" != yes ] && ! hook_gpu_node; then
    hook_unknown "no NVIDIA GPU here (no NVIDIA driver, no NVIDIA GPU on the PCI bus): not a GPU node, not checked (GPU_NODE=yes checks anyway)"
    return 0
  fi
  set -f  # ARGS and ENV are split into words, never globbed
  for word in $(hook_get ENV ""); do
    [[ $word =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || { set +f; hook_unknown "cannot run: ENV: '$word' is not NAME=VALUE"; return 0; }
    env_vars+=("$word")
  done
  args=($(hook_get ARGS ""))
  set +f
  home=$(getent passwd "$(id -u)" | cut -d: -f6)
  # Never the job's folder: `python -m` puts the working directory first on the import path.
  cd -- "$RECORDS" || { hook_unknown "cannot run: cannot enter $RECORDS"; return 0; }
  # One run of this hook at a time on the node (two prologs of jobs sharing it): the second would move the first
  # one's record aside while it is written. The lock goes with this shell.
  if command -v flock >/dev/null 2>&1; then
    exec {HOOK_LOCK_FD}>>"$RECORDS/$HOOK_MODE.lock" && flock -w "$((runs / 2))" "$HOOK_LOCK_FD" \
      || { hook_unknown "not checked: another $HOOK_MODE run held $RECORDS/$HOOK_MODE.lock for $((runs / 2)) s"; return 0; }
  fi
  # The last run's record is kept aside, not removed: `validate --trust-recent` (the prolog) finds the pass in it.
  [ -e "$record" ] && mv -f -- "$record" "$RECORDS/$HOOK_MODE-previous.jsonl"
  rm -f -- "$record" "$output"
  # A redirection that fails runs nothing and leaves 1, validate's "a check failed": refused before the run.
  : >"$output" 2>/dev/null || { hook_unknown "cannot run: cannot write $output"; return 0; }
  # validate's arguments, the first run's and the re-test's alike (node-state re-runs the failed tests with
  # them, adding -k and its own record): an option every run of this hook should take goes here.
  # ${a[@]+"${a[@]}"}: an empty array under `set -u` is an error in bash before 4.4 (RHEL 7's 4.2), which
  # would end every prolog with a non-zero exit: Slurm drains the node.
  validate_args=(--level quick --wait-for-node "$HOOK_WAIT" ${args[@]+"${args[@]}"})
  HOOK_RUN_ARGS=("${validate_args[@]}")  # for hook_confirm_drain: the drain rules come from the thresholds they name
  # A clean environment: nothing the job or slurmd's caller set (PYTHONPATH, PYTEST_ADDOPTS, LD_PRELOAD)
  # reaches a run as root; only the fixed PATH, HOME, LANG and the settings' ENV.
  env -i PATH="$PATH" HOME="${home:-/}" LANG=C.UTF-8 ${HOOK_GPUS:+CUDA_VISIBLE_DEVICES="$HOOK_GPUS"} ${env_vars[@]+"${env_vars[@]}"} \
    timeout --kill-after=5 "$((runs - SECONDS))" "$WIRECHECK" validate --wirecheck-json "$record" ${HOOK_VALIDATE_ARGS[@]+"${HOOK_VALIDATE_ARGS[@]}"} \
    "${validate_args[@]}" >"$output" 2>&1 </dev/null
  code=$?
  # The re-test and a diagnosis share what is left of the hook's time limit (the first run's failure
  # drains when too little is left); node-state's warnings (the guard not available) go to syslog.
  left=$((runs - SECONDS))
  [ "$left" -gt 0 ] || left=0
  said=$RECORDS/$HOOK_MODE-decision.err
  # node-state re-runs validate on the same GPUs; kubectl (the guard, on Kubernetes) finds its cluster from the
  # pod's KUBERNETES_SERVICE_HOST and _PORT, and scontrol and sinfo theirs from SLURM_CONF.
  HOOK_LINE=$(env -i PATH="$PATH" HOME="${home:-/}" LANG=C.UTF-8 ${SLURM_CONF:+SLURM_CONF="$SLURM_CONF"} \
    ${HOOK_GPUS:+CUDA_VISIBLE_DEVICES="$HOOK_GPUS"} ${KUBERNETES_SERVICE_HOST:+KUBERNETES_SERVICE_HOST="$KUBERNETES_SERVICE_HOST"} \
    ${KUBERNETES_SERVICE_PORT:+KUBERNETES_SERVICE_PORT="$KUBERNETES_SERVICE_PORT"} ${env_vars[@]+"${env_vars[@]}"} \
    timeout --kill-after=5 "$((left + HOOK_RESERVE - 10))" "$WIRECHECK" node-state --exit-code "$code" --record "$record" \
    --output "$output" --max-length "$HOOK_MAX_LENGTH" "${HOOK_RULES[@]}" --time-left "$left" \
    -- "${validate_args[@]}" </dev/null 2>"$said")
  HOOK_STATE=$?
  while IFS= read -r word; do [ -n "$word" ] && hook_log "$word"; done <"$said"
  case $HOOK_STATE in 0|1|2|30|31|32) ;; *) HOOK_STATE=2 ;; esac
  [ -n "$HOOK_LINE" ] || { HOOK_STATE=2; HOOK_LINE="wirecheck: no verdict: node-state said nothing (validate exit $code; see $output and $said)"; }
  if [ "$HOOK_STATE" != 0 ] && [ "$HOOK_STATE" != 2 ]; then  # the evidence stays: the next run replaces $record
    local stamp
    stamp=$(date -u +%Y%m%dT%H%M%SZ)
    cp -p -- "$record" "$RECORDS/$HOOK_MODE-unhealthy-$stamp.jsonl" 2>/dev/null
    cp -p -- "$output" "$RECORDS/$HOOK_MODE-unhealthy-$stamp.log" 2>/dev/null
  fi
  # A failing node is checked again and again (node-problem-detector every 30 minutes, a cordoned node too):
  # the newest evidence stays, the folder does not grow without bound.
  hook_prune "$HOOK_MODE-unhealthy-*.jsonl" "$HOOK_KEEP"
  hook_prune "$HOOK_MODE-unhealthy-*.log" "$HOOK_KEEP"
  hook_prune "replace-*.tar.gz" "$HOOK_KEEP"
  return 0
}

hook_node() {  # this node's Slurm name (slurmd's), or Kubernetes' (NODE_NAME: daemonset.yaml's downward API)
  if [ -n "${SLURMD_NODENAME:-}" ]; then echo "$SLURMD_NODENAME"
  elif [ "$HOOK_MODE" = plugin ] && [ -n "${NODE_NAME:-}" ]; then echo "$NODE_NAME"
  else hostname -s; fi
}

hook_node_state() {  # NODE: Slurm's state of the node (IDLE, ALLOCATED, IDLE+DRAIN, ...), empty when unknown
  [ -n "$SCONTROL" ] && "$SCONTROL" show node -o "$1" 2>/dev/null | grep -o 'State=[^ ]*' | head -n 1 | cut -d= -f2
}

# hook_drain NODE REASON: never resumes, and never replaces the reason of a node already drained (by a person,
# or by an earlier run): the first reason is the one to read.
hook_drain() {
  local node=$1 reason=$2 state
  HOOK_DRAINED_NOW=0
  [ -n "$SCONTROL" ] || { hook_log "cannot drain $node: no scontrol (set SCONTROL): $reason"; return 1; }
  state=$(hook_node_state "$node")
  case $state in
    *DRAIN*|DOWN*|*+DOWN*) hook_log "$node is $state already: left as it is; this run found: $reason"; return 0 ;;
  esac
  "$SCONTROL" update NodeName="$node" State=DRAIN Reason="$reason" || { hook_log "scontrol could not drain $node: $reason"; return 1; }
  HOOK_DRAINED_NOW=1
  hook_log "drained $node: $reason"
}

# hook_confirm_drain NODE: after this hook drained NODE (Slurm), node-state reads the order the controller stamped
# the partition's wirecheck drains in; where this one was beyond the fleet guard's share (hooks that failed in
# the same second each read the partition before the others' drains landed), it is taken back: the node is
# resumed, only while its reason is still this hook's, and its comment says GUARD. Returns 0 when taken back.
hook_confirm_drain() {
  local node=$1 line code shown
  line=$(env -i PATH="$PATH" HOME="${HOME:-/}" LANG=C.UTF-8 ${SLURM_CONF:+SLURM_CONF="$SLURM_CONF"} \
    timeout --kill-after=2 8 "$WIRECHECK" node-state --exit-code 1 --after-drain --max-length "$HOOK_MAX_LENGTH" \
    "${HOOK_RULES[@]}" -- ${HOOK_RUN_ARGS[@]+"${HOOK_RUN_ARGS[@]}"} </dev/null 2>>"$RECORDS/$HOOK_MODE-decision.err")
  code=$?
  [ "$code" = 31 ] || { [ -z "$line" ] || hook_log "$node: $line"; return 1; }
  shown=$("$SCONTROL" show node -o "$node" 2>/dev/null)
  case $shown in
    *"Reason=wirecheck:"*) ;;
    *) hook_log "$node: one drain too many, but its reason is no longer this hook's: left drained; $line"; return 1 ;;
  esac
  "$SCONTROL" update NodeName="$node" State=RESUME || { hook_log "scontrol could not take back the drain of $node: $line"; return 1; }
  HOOK_STATE=31
  HOOK_LINE=$line
  hook_comment "$node" "$line"
  return 0
}

# hook_comment NODE LINE: the fleet guard held this node's drain: the node stays in service, its comment
# says why (`scontrol show node`, `sinfo -O comment`), and syslog says it on every run until a person removes
# the guard file.
hook_comment() {
  local node=$1 line=$2 theirs
  hook_log "NOT DRAINED $node: $line"
  [ -n "$SCONTROL" ] || return 0
  # A person's comment (an RMA ticket, a note to the next shift) stays after ours; an earlier GUARD line of ours
  # is replaced.
  # `-o` puts the node's other fields (` Reason=...`) after the comment
  theirs=$("$SCONTROL" show node -o "$node" 2>/dev/null | grep -o 'Comment=.*' | head -n 1 | cut -d= -f2- \
    | sed -E 's/ [A-Z][A-Za-z]+=.*$//')
  theirs=${theirs#*wirecheck: GUARD* | }
  case $theirs in ''|'(null)'|wirecheck:*) ;; *) line="$line | $theirs" ;; esac
  "$SCONTROL" update NodeName="$node" Comment="$line" || hook_log "scontrol could not set the comment of $node"
}

# hook_act NODE: what the prolog and the health check do with HOOK_STATE; returns 1 when the node was drained.
hook_act() {
  local node=$1
  case $HOOK_STATE in
    1|32)
      hook_drain "$node" "$HOOK_LINE" || return 1
      # one too many of a partition's drains made in the same second: taken back, the node stays in service
      [ "$HOOK_DRAINED_NOW" = 1 ] && [ "$HOOK_KIND" = slurm ] && hook_confirm_drain "$node" && return 0
      return 1 ;;
    31) hook_comment "$node" "$HOOK_LINE" ;;
    30) hook_log "$node not drained: $HOOK_LINE" ;;
    0) hook_log "$node $HOOK_LINE" ;;
    *) hook_log "$node not checked: $HOOK_LINE" ;;
  esac
  return 0
}
