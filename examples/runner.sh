#!/usr/bin/env bash
# examples/runner.sh: a small but complete storm runner.
#
# usage: examples/runner.sh [--once] [--help] [STORM_ROOT]
#   STORM_ROOT defaults to $STORM_QUEUE_ROOT, else the current directory;
#   --help prints this text and exits 0.
#
# STORM_ROOT is a storm directory or a database storm's URL
# (postgresql://... or postgres://...). On a database storm there are no
# files to share: a lane's work runs in $RUNNER_LANES/SLUG on this host, the
# lease length comes from `storm-queue why`, and a finished lane is settled
# (by a runner that may settle) with `storm-queue settle` (recorded) instead
# of a line appended to integrated.txt or abandoned.txt.
#
# It asks `storm-queue claim` what to do, does exactly that, and asks again,
# until the storm is empty. It is what a real runner does, minus the real
# work (which a lane supplies as an executable lanes/SLUG/run.sh, or which
# $LANE_COMMAND stands in for).
#
# A runner does only a runner's work. It learns once, at start, with
# `storm-queue whoami --json`, whether it may settle a lane (the review):
# the operator may (on a directory storm the runner is the operator's
# account, as its claims are), and so may a source the operator declares;
# a database storm's runner role (docs/many-hosts.md) may not. A runner
# that may not settle makes only a runner's requests (claim, renew, finish,
# release; and reads): a lane it finished ok it leaves for the operator's
# review (`storm-queue settle SLUG integrated|abandoned`), saying so, and
# goes on. Under `[runner] unattended` (the declaration; UNATTENDED on a
# directory storm) the next claim gives it the next lane; otherwise `claim`
# answers `review SLUG...`, and the runner says once which lanes await the
# review and waits for it with `claim --wait $RUNNER_WAIT` (which waits a
# review out for a caller who may not settle: it answers once the operator
# has settled them). It says which of the two it does, once.
#
# --once: ask for one decision, carry it out (run the lane to its end, or
# settle the lanes to review when it may) and exit 0, whatever it was: for
# cron, which mails what it prints (an empty storm, or one that waits on a
# running lane, prints nothing; one held up by the operator says so every
# run), e.g.
#   */5 * * * * examples/runner.sh --once /srv/storm
#
# A lane that fails is retried by the storm itself: `finish --result
# failed` spends the attempt, and under a declared `[runner] retry_delay`
# the storm passes the lane over for that many seconds (doubled with each
# attempt spent, at most `[runner] retry_max`) while other lanes run; the
# runner says what `finish` answered ("...; attempt 1 of 3, it will be
# claimed again after STAMP"). Once its `[runner] attempts` are spent the
# lane is quarantined, as ever. The runner never schedules a lane.
#
# When the answer is `wait` or `halted`, the next claim is `claim --wait
# $RUNNER_WAIT`: it answers the moment a lane can be claimed (or after
# RUNNER_WAIT seconds, `wait` again), so the runner never sleeps for work.
# Exit 5 (busy, or a database storm's server unreachable: nothing changed)
# is asked again after a pause that doubles each time in a row.
#
# When nothing more can run for it (the answer is `wait`, and every lane
# not settled is finished, awaiting the operator's review), the runner says
# so and exits 0, as on `empty`. When nothing else can run and nothing
# will change by itself (no lane is running under a lease or scheduled: a
# quarantined or held lane, a lane blocked or waiting on one, a dependency
# queue.txt does not know, finished lanes waiting for a batch review under
# UNATTENDED, a running marker with no lease holding a [runner] slot), the
# runner says so once on stderr, naming each lane and the command that
# unblocks it (`storm-queue unpark SLUG --reason TEXT`, `storm-queue unhold
# SLUG --reason TEXT`, ...), and goes on
# waiting for the operator (or, with --once, exits 0). It says it again
# only when what holds the storm up changes.
#
# Several copies may run at once against one storm, on one machine or on
# several that share it: `claim` takes a lease on a lane under the writers'
# lock, so no two runners ever get the same lane, and `[runner] slots` in
# storm.toml says how many lanes may run at once. A lease lasts its TTL; the
# runner renews it in the background while the lane's work runs. A runner
# that dies stops renewing, its lease expires, and the next `claim` (by any
# runner) records the expiry and hands the lane out again with a greater
# fencing token. The dead runner's token is then refused (`stale_fence`), so
# a runner that lost its lease can never overwrite the lane's result.
#
# Every line the runner prints (on stderr) starts "runner HOLDER:", HOLDER
# being the name it claims leases under, so the lines of several runners
# can be told apart; storm-queue's own words are passed on the same way.
# The lane's work prints as it likes.
#
# Stopping: on SIGINT (Ctrl-C) or SIGTERM (or SIGHUP) the runner stops the
# lane's work (the lane runs in a process group of its own: SIGTERM to the
# group, SIGKILL to what is left of it after $RUNNER_GRACE seconds), gives
# its lease back with `storm-queue release SLUG --token T` (recorded: the
# lane may be claimed again at once, by any runner; the attempt stays
# spent) and exits 130 (SIGINT) or 143 (SIGTERM) (129: SIGHUP). Idle, it
# just exits so: a `claim --wait` it waits in (in a process group of its
# own) is ended at once with SIGTERM, which records nothing. A runner
# killed with SIGKILL can do none of this: its
# lane's work runs on, its lease expires, and `storm-queue recover SLUG
# --force --reason TEXT` ends it sooner.
#
# Cancelling: while a lane's work runs, the runner waits beside it for the
# lease to end (`storm-queue lease SLUG --token T --wait $RUNNER_WAIT`,
# woken at once by a change to the storm, as `claim --wait` is). When the
# operator runs `storm-queue cancel SLUG --reason TEXT` (the lane is
# settled abandoned), the runner hears it within a second, whatever the
# TTL, and stops the lane's work: SIGTERM to its process group, SIGKILL to
# what is left of it after at most 2 seconds ($RUNNER_GRACE when shorter),
# so the work has ended within 5 seconds of the cancel; it says who
# cancelled it, when and why, reports nothing for the lane, and goes on to
# the next lane. A lease lost otherwise while the work runs (expired and
# taken back, or ended by the operator's `recover --force`) stops the work
# the same way: its result could not be recorded. The renew (at least
# every third of the TTL) is the fallback: when a renew (or the finish) is
# refused `lane_cancelled`, the runner stops the lane's work as above too
# (a storm-queue without the `lease` command is heard so).
#
# Environment:
#   STORM_QUEUE    how to call storm-queue (default: storm-queue); it is
#                  split into words, so "python3 -m storm_queue" works
#   LANE_COMMAND   the work of a lane without lanes/SLUG/run.sh (default: true),
#                  run by bash in the lane's directory
#   RUNNER_WAIT    after a `wait` or `halted`, the next claim waits up to this
#                  many whole seconds for a change that can make a lane
#                  claimable (`claim --wait`), rather than the runner sleeping;
#                  it answers the moment the storm changes (default: 60);
#                  while a lane runs, each wait for its lease to end
#                  (`lease --wait`) lasts as long, then is asked again
#   RUNNER_POLL    the first pause, in seconds, before asking again when the
#                  storm is busy or its server unreachable (exit 5: nothing
#                  changed) (default: 1); each further exit 5 in a row of a
#                  claim, finish or settle doubles the pause (a renew keeps
#                  its own interval)
#   RUNNER_BUSY_MAX     the longest such pause, in seconds (default: 30)
#   RUNNER_LOG     if set, a file that gets one slug a line as each lane starts
#   RUNNER_HOLDER  if set, the name this runner claims leases under
#                  (`claim --holder`) and names itself by; default
#                  "<hostname>-<pid>", the pid being this runner's
#   RUNNER_TTL     if set, the lease length in whole seconds asked for on
#                  claim and on every renew (`--ttl`; storm.toml [runner]
#                  ttl_min..ttl_max); default: the storm's `[runner] ttl`
#   RUNNER_RENEW   seconds between renewals while a lane runs (default, and
#                  at most: a third of the lease length, so two renewals can
#                  fail, e.g. on a busy storm, before the lease runs out)
#   RUNNER_GRACE   seconds a stopped lane's processes have to end after
#                  SIGTERM before they get SIGKILL (default: 10; a cancelled
#                  lane's, or one whose lease was lost, at most 2)
#   RUNNER_LANES   the directory holding each lane's work directory SLUG (and
#                  its run.sh) (default: STORM_ROOT/lanes on a directory
#                  storm, ./lanes on a database storm)
#
# Exit status: 0 when the storm is empty, or nothing more can run for it
# (every lane left awaits the operator's review) (with --once: when the
# decision was carried out); otherwise storm-queue's own status (3: the priority order is
# unknown, and a runner must not guess at it; the operator repairs it with
# `storm-queue reset`; 2 for a decision or answer this runner does not
# understand, or a usage error); 130 or 143 when stopped by SIGINT or
# SIGTERM.

set -euo pipefail

# The name this runner claims leases under and names itself by: a name as
# storm-queue takes one (this host's name made one, and this runner's pid).
host="$(uname -n 2>/dev/null || true)"
host="${host//[^A-Za-z0-9._-]/-}"
while [[ "$host" == [.-]* ]]; do host="${host:1}"; done
while [[ "$host" == *[.-] ]]; do host="${host%?}"; done
host="${host:0:150}"
HOLDER="${RUNNER_HOLDER:-${host:-host}-$$}"
HOLDER="${HOLDER//../.}"
RUNNER_PID=$$

say() { printf 'runner %s: %s\n' "$HOLDER" "$*" >&2; }
usage() { sed -n '2,/^$/s/^# \{0,1\}//p' "$0"; }

ONCE=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --once) ONCE=1; shift ;;
        -h | --help) usage; exit 0 ;;
        --) shift; break ;;
        -*) say "$(printf 'unknown option %q (usage: runner.sh [--once] [--help] [STORM_ROOT])' "$1")"; exit 2 ;;
        *) break ;;
    esac
done
if [[ $# -gt 1 ]]; then
    say 'one storm root at most (usage: runner.sh [--once] [--help] [STORM_ROOT])'
    exit 2
fi
ROOT="${1:-${STORM_QUEUE_ROOT:-.}}"
# A database storm is named by its URL; anything else is a directory.
DATABASE=0
case "$ROOT" in
    postgresql://* | postgres://*) DATABASE=1 ;;
esac
if [[ $DATABASE -eq 1 ]]; then
    LANES="${RUNNER_LANES:-$PWD/lanes}"
else
    LANES="${RUNNER_LANES:-$ROOT/lanes}"
fi
POLL="${RUNNER_POLL:-1}"
WAIT_FOR="${RUNNER_WAIT:-60}"
BUSY_MAX="${RUNNER_BUSY_MAX:-30}"
GRACE="${RUNNER_GRACE:-10}"
for setting in "RUNNER_GRACE=$GRACE" "RUNNER_WAIT=$WAIT_FOR"; do
    if ! [[ "${setting#*=}" =~ ^[0-9]{1,9}$ ]]; then
        say "$setting is not a whole number of seconds"
        exit 2
    fi
done
if [[ $WAIT_FOR -eq 0 ]]; then
    say "RUNNER_WAIT=0: a claim must wait at least 1 second for the storm to change"
    exit 2
fi
for gone in RUNNER_RETRY_DELAY RUNNER_RETRY_MAX; do  # the storm's own backoff replaced them
    if [[ -n "${!gone+set}" ]]; then
        say "$gone is no longer read: a failed lane waits the storm's own backoff, [runner] retry_delay and retry_max in storm.toml (declared with storm-queue declare on a database storm)"
    fi
done
# storm-queue's command line, split into words once.
read -r -a STORM_QUEUE_CMD <<<"${STORM_QUEUE:-storm-queue}"

# storm-queue, its stdout as it is, each line it says on stderr said again
# as this runner's (in a file of this process's own while it runs). It
# ignores SIGINT: Ctrl-C at a terminal signals the whole process group, and
# a claim or finish cut short could take or keep a lease no one gives back;
# the runner hears the Ctrl-C and acts on it once the command has answered.
ERRORS="$(mktemp -d "${TMPDIR:-/tmp}/storm-runner.XXXXXX")"
# (A subshell signalled before it set its own traps may run this one: only the runner removes it.)
trap '[[ $BASHPID != "$RUNNER_PID" ]] || rm -rf "$ERRORS"' EXIT
sq() {
    local err="$ERRORS/$BASHPID" rc=0
    { (trap '' INT && exec "${STORM_QUEUE_CMD[@]}" "$@") 2>"$err" || rc=$?; } 2>/dev/null  # (see say_again)
    say_again "$err"
    return "$rc"
}

# Each line of the file $1 (what storm-queue said on stderr) said as this
# runner's; the file is removed. A renewer or a lease's watcher may ask
# after the runner has ended and removed $ERRORS: then nothing is said.
say_again() {
    local line fd
    { exec {fd}<"$1"; } 2>/dev/null || return 0  # gone with $ERRORS: the runner has ended (a watcher said late)
    while IFS= read -r -u "$fd" line || [[ -n "$line" ]]; do
        [[ -z "$line" ]] || say "$line"
    done
    exec {fd}<&-
    rm -f "$1"
}

# Exit 5 (busy, or a database storm's server cannot be reached: nothing
# changed, a retry is safe) is asked again after a pause that doubles with
# each exit 5 in a row, from $POLL up to $BUSY_MAX seconds, so that runners
# wait out a restarting server instead of hammering it; any other answer
# resets it (busy_over).
BUSY_DELAY=""
busy_again() {
    local delay="${BUSY_DELAY:-$POLL}"
    say "storm busy or unreachable (exit 5, nothing changed); $1 again in ${delay}s"
    nap "$delay"
    BUSY_DELAY="$(awk -v d="$delay" -v m="$BUSY_MAX" 'BEGIN { d *= 2; print (d > m ? m : d) }')"
}
busy_over() { BUSY_DELAY=""; }

# The flags every claim and renew carries, from the environment.
CLAIM_FLAGS=(--holder "$HOLDER")
TTL_FLAGS=()
if [[ -n "${RUNNER_TTL:-}" ]]; then
    TTL_FLAGS+=(--ttl "$RUNNER_TTL")
fi

# Settle a finished lane from its result.json: "ok" is integrated (lanes that
# depend on it may now run); anything else ("blocked", which `claim` writes,
# as `next` does, for a lane whose dependency was abandoned) is abandoned. In
# a real storm a reviewer looks at the work first; this runner reviews by
# the result alone. The ledgers are plain files that storm-queue re-reads on
# every call, so an append is all it takes.
#
# With several runners, two of them can be told `review X` at once (or one
# is told while the runner that finished X is about to settle it), so the
# check and the append happen under flock(1) on integrated.txt itself: a
# lane is settled once, whoever gets there first.
#
# Only a runner that may settle ($SETTLES: the operator, a declared source)
# settles; a runner role never asks to (its lanes await the operator).
#
# A database storm has no ledger files: there the runner asks storm-queue to
# settle the lane (`settle SLUG integrated|abandoned`, recorded; one that
# another runner settled first is a recorded no-op, said nothing of). Its
# result lives in the database: a lane the runner itself finished ok is
# integrated; a lane to review is abandoned when `why` says a dependency it
# needs was abandoned (the blocked mark `claim` wrote), else integrated.
settle() {
    local slug="$1" known="${2:-}"
    if [[ $DATABASE -eq 1 ]]; then
        settle_in_database "$slug" "$known"
        return
    fi
    local result="$ROOT/lanes/$slug/.qwenstorm/result.json"
    (
        if command -v flock >/dev/null; then
            flock 9
        fi
        if grep -qxF -- "$slug" "$ROOT/integrated.txt" "$ROOT/abandoned.txt" 2>/dev/null; then
            exit 0  # another runner settled it first
        fi
        if grep -Eq '"status"[[:space:]]*:[[:space:]]*"ok"' "$result"; then
            printf '%s\n' "$slug" >>"$ROOT/integrated.txt"
            say "settled $slug: integrated"
        else
            printf '%s\n' "$slug" >>"$ROOT/abandoned.txt"
            say "settled $slug: abandoned"
        fi
    ) 9>>"$ROOT/integrated.txt"
}

settle_in_database() {
    local slug="$1" known="$2" ledger=integrated why answer
    if [[ "$known" != ok ]]; then
        why="$(sq why "$slug" --root "$ROOT" --json)" || exit $?
        if [[ "$why" =~ \"status\":\ \"abandoned\",\ \"satisfied\":\ false ]]; then
            ledger=abandoned
        fi
    fi
    while true; do
        local rc=0
        answer="$(sq settle "$slug" "$ledger" --root "$ROOT" --json \
            --reason "runner $HOLDER: reviewed by its result alone")" || rc=$?
        case "$rc" in
            0) busy_over; break ;;
            5) busy_again "settling $slug" ;;
            *) say "settle $slug refused: $answer"; exit "$rc" ;;
        esac
    done
    if [[ "$answer" != *'"outcome": "noop"'* ]]; then
        say "settled $slug: $ledger"
    fi
}

# The lease length of the lane just claimed, in seconds: $RUNNER_TTL when
# set, else what the running marker that `claim` wrote says (expires minus
# claimed, as numbers or as RFC 3339 times), else storm-queue's default, 600.
lease_seconds() {
    local marker="$ROOT/lanes/$1/.qwenstorm/running"
    if [[ -n "${RUNNER_TTL:-}" ]]; then
        printf '%s\n' "$RUNNER_TTL"
        return
    fi
    if [[ $DATABASE -eq 1 ]]; then  # no marker: the lease's ttl, as `why --json` gives it
        local ttl
        ttl="$(sq why "$1" --root "$ROOT" --json 2>/dev/null | sed -nE 's/.*"lease": \{[^}]*"ttl": ([0-9]+).*/\1/p')" || true
        printf '%s\n' "${ttl:-600}"
        return
    fi
    local claimed expires
    claimed="$(sed -nE 's/.*"claimed"[[:space:]]*:[[:space:]]*"?([^",}]*)"?.*/\1/p' "$marker" 2>/dev/null || true)"
    expires="$(sed -nE 's/.*"expires"[[:space:]]*:[[:space:]]*"?([^",}]*)"?.*/\1/p' "$marker" 2>/dev/null || true)"
    if [[ -n "$claimed" && -n "$expires" ]]; then
        [[ "$claimed" =~ ^[0-9.]+$ ]] || claimed="$(date -u -d "$claimed" +%s.%N 2>/dev/null || true)"
        [[ "$expires" =~ ^[0-9.]+$ ]] || expires="$(date -u -d "$expires" +%s.%N 2>/dev/null || true)"
    fi
    if [[ -n "$claimed" && -n "$expires" ]]; then
        awk -v c="$claimed" -v e="$expires" 'BEGIN { t = e - c; if (t <= 0) t = 600; printf "%.3f\n", t }'
    else
        printf '600\n'
    fi
}

# Stopping. The traps only take note (and stop the lane's work, if it runs);
# the runner acts on the note where it can: giving back the lease it holds
# (`release`), then exiting 130 (SIGINT) or 143 (SIGTERM). A lane's work,
# a waiting claim and a pause run in the background and the runner `wait`s
# for them, so a signal is acted on at once, not when they end: the trap
# stops the lane's work, and ends the claim or pause (stop_waiting).
STOP=0       # 130 or 143 once SIGINT or SIGTERM came
CANCELLED=0  # 1 once the renewer or the lease's watcher said the lane was cancelled, or its lease lost (SIGUSR1)
CANCEL_GRACE=$((GRACE < 2 ? GRACE : 2))  # a cancelled lane's work ends within 5 s of the cancel
LANE_PID=""  # the lane's work while it runs
KILLER=""    # what sends SIGKILL to a stopped lane's processes left after $GRACE seconds
WAITER=""    # a waiting claim (`claim --wait`), or a pause, while the runner waits for it
trap 'STOP=130; stop_lane; stop_waiting' INT
trap 'STOP=143; stop_lane; stop_waiting' TERM
trap 'STOP=129; stop_lane; stop_waiting' HUP
trap 'CANCELLED=1; stop_lane "$CANCEL_GRACE"' USR1

# Stop the lane's work, if it runs: SIGTERM to its process group (the
# lane runs in a group of its own), SIGKILL to what is left of the group
# after $1 seconds (default $GRACE). The killer ends as soon as the whole
# group has (a child that ignores SIGTERM outlives the lane's own process:
# the runner waits for the killer, not for the lane alone).
stop_lane() {
    [[ -n "$LANE_PID" && -z "$KILLER" && $BASHPID == "$RUNNER_PID" ]] || return 0
    local grace="${1:-$GRACE}"
    kill -TERM -- "-$LANE_PID" 2>/dev/null || kill -TERM "$LANE_PID" 2>/dev/null || true
    (
        trap 'kill $(jobs -p) 2>/dev/null || true; exit 0' TERM  # stopped: its nap goes with it
        for ((tick = 0; tick < grace * 10; tick++)); do
            kill -0 -- "-$LANE_PID" 2>/dev/null || exit 0
            sleep 0.1 </dev/null >/dev/null 2>&1 &
            wait $! || true
        done
        kill -KILL -- "-$LANE_PID" 2>/dev/null || true
    ) &
    KILLER=$!
}

# End what the runner waits for between claims ($WAITER: a claim that
# waits, in a process group of its own, or a pause), if anything: SIGTERM.
# A waiting claim records nothing when so ended (a request it has begun is
# recorded whole: the writers' lock holds the signal back until then).
stop_waiting() {
    [[ -n "$WAITER" && $BASHPID == "$RUNNER_PID" ]] || return 0
    kill -TERM -- "-$WAITER" 2>/dev/null || kill -TERM "$WAITER" 2>/dev/null || true
}

# Wait until the child $1 has ended (a trap interrupts `wait`; the child may
# still run then, so wait again); its exit status in $REAPED.
reap() {
    REAPED=0
    while true; do
        wait "$1" 2>/dev/null && REAPED=0 || REAPED=$?  # (bash's own "Killed" note is not ours to print)
        if ((REAPED > 128)) && kill -0 "$1" 2>/dev/null; then
            continue
        fi
        return 0
    done
}

# Sleep $1 seconds, or until a signal comes.
nap() {
    sleep "$1" </dev/null >/dev/null 2>&1 &
    WAITER=$!
    [[ $STOP -eq 0 ]] || stop_waiting  # a signal that came before WAITER was known
    reap "$WAITER"
    WAITER=""
}

# `claim --wait $WAIT_FOR`, its answer in $DECISION, its exit status
# returned. It runs in the background, in a process group of its own (so
# Ctrl-C at a terminal reaches only the runner, and a SIGTERM from the
# runner reaches storm-queue however $STORM_QUEUE starts it), and the
# runner waits for it: a signal ends it at once (stop_waiting) rather than
# after up to $WAIT_FOR seconds.
claim_waiting() {
    local out="$ERRORS/claim.out" err="$ERRORS/claim.err"
    set -m
    (trap '' INT && exec "${STORM_QUEUE_CMD[@]}" claim --wait "$WAIT_FOR" "$@") </dev/null >"$out" 2>"$err" &
    WAITER=$!
    set +m
    [[ $STOP -eq 0 ]] || stop_waiting
    reap "$WAITER"
    WAITER=""
    say_again "$err"
    DECISION="$(<"$out")"
    rm -f "$out"
    return "$REAPED"
}

# When SIGINT or SIGTERM came: give back the lease on $1 held under token $2
# (when given), say so, and exit 130 or 143.
stop_now() {
    [[ $STOP -ne 0 ]] || return 0
    local signal rc tries
    case "$STOP" in 130) signal=INT ;; 129) signal=HUP ;; *) signal=TERM ;; esac
    if [[ -n "${1:-}" ]]; then
        for tries in 1 2 3 4 5; do
            rc=0
            sq release "$1" --token "$2" --root "$ROOT" --reason "runner $HOLDER: stopped by SIG$signal" >/dev/null || rc=$?
            [[ $rc -eq 5 ]] || break
        done
        if [[ $rc -eq 0 ]]; then
            say "stopped by SIG$signal: released the lease on $1 (token $2); it may be claimed again at once"
        else
            say "stopped by SIG$signal: could not release the lease on $1 (token $2, exit $rc); it ends when it expires"
        fi
    else
        say "stopped by SIG$signal"
    fi
    exit "$STOP"
}

# Keep a lease alive: renew it every $1 seconds until told to stop (SIGTERM),
# until the lease is lost, or until this runner itself is gone. It runs in the
# background while the lane works. A renewal in flight when the stop comes is
# finished first (bash runs the trap after the foreground command), so it can
# never land after `finish` and be refused. Told the lane was cancelled, it
# tells the runner (SIGUSR1), which stops the lane's work.
keep_alive() {
    local slug="$1" token="$2" every="$3" nap="" rc answer
    # Every nap this renewer started goes with it (`jobs -p`: also one whose
    # $! was not yet taken when the stop came), and a nap holds none of the
    # runner's streams, so nothing it leaves keeps a reader of them waiting.
    trap 'kill $(jobs -p) 2>/dev/null || true; exit 0' TERM
    trap '' INT HUP  # the runner acts on these; the renewer is stopped by it
    trap - USR1
    while true; do
        sleep "$every" </dev/null >/dev/null 2>&1 &
        nap=$!
        wait "$nap" || true
        nap=""
        # A runner killed with SIGKILL cannot stop its renewer: the renewer
        # notices and stops, so the dead runner's lease expires as it must.
        if ! kill -0 "$RUNNER_PID" 2>/dev/null; then
            exit 0
        fi
        rc=0
        answer="$(sq renew "$slug" --token "$token" --root "$ROOT" --wait "$every" "${TTL_FLAGS[@]}" --json)" || rc=$?
        [[ -d $ERRORS ]] || exit 0  # the runner has ended meanwhile: no one to tell
        case "$rc" in
            0) ;;
            5) say "storm busy or unreachable (exit 5, nothing changed); renewing $slug again in ${every}s" ;;
            *)
                if [[ "$answer" == *'"code": "lane_cancelled"'* ]]; then
                    # (said once: not when the lease's watcher heard the cancel first)
                    [[ -f "$ERRORS/ended" ]] || say "$slug was cancelled (its renew was refused lane_cancelled): stopping its work"
                    kill -USR1 "$RUNNER_PID" 2>/dev/null || true
                    exit 0
                fi
                # 2: stale_fence (the lease expired and was taken over, or
                # was recovered by the operator) or the lease reached
                # [runner] max_lease_age; anything else is storm-queue's own
                # trouble. Either way this runner no longer holds the lane
                # for long: its `finish` will say so.
                say "could not renew the lease on $slug (token $token, exit $rc); no longer renewing"
                exit 0
                ;;
        esac
    done
}

# Wait beside the lane's work for the lease on $1 (token $2) to end
# (`storm-queue lease --wait`: it answers the moment the storm records
# the end, as a waiting claim wakes; asked again each $WAIT_FOR seconds
# while the lease lives, and while this runner does). When it ends (a
# cancel; or the lease lost: expired and taken back, recovered), its answer
# goes to $ERRORS/ended and the runner is told (SIGUSR1), which stops the
# lane's work at once. Stopped by the runner (SIGTERM) once the work has
# ended, it ends its `lease` with it. If storm-queue cannot answer (exit 2,
# 3, 4: an older storm-queue without `lease`, say), it says so once and
# leaves the cancel to the renewer.
watch_lease() {
    local slug="$1" token="$2" out="$ERRORS/lease.$BASHPID" err="$ERRORS/lease-said.$BASHPID" rc
    trap 'kill $(jobs -p) 2>/dev/null || true; exit 0' TERM
    trap '' INT HUP  # the runner acts on these; the watcher is stopped by it
    trap - USR1
    while kill -0 "$RUNNER_PID" 2>/dev/null; do
        { (trap '' INT && exec "${STORM_QUEUE_CMD[@]}" lease "$slug" --token "$token" --wait "$WAIT_FOR" \
            --root "$ROOT") </dev/null >"$out" 2>"$err" & } 2>/dev/null
        rc=0
        wait $! || rc=$?
        [[ -d $ERRORS ]] || exit 0  # the runner has ended meanwhile: no one to tell
        say_again "$err"
        case "$rc" in
            0)  # ended: its one line says how (gone with $ERRORS: the runner has ended, and needs no telling)
                mv -f "$out" "$ERRORS/ended" 2>/dev/null || exit 0
                kill -USR1 "$RUNNER_PID" 2>/dev/null || true
                exit 0
                ;;
            6) busy_over ;;  # live still: wait again
            5) busy_again "waiting on the lease of $slug" ;;
            *)
                say "cannot wait on the lease of $slug (storm-queue lease, exit $rc): a cancel is heard at its next renew"
                exit 0
                ;;
        esac
    done
}

# Run one claimed lane: start its work (with STORM_QUEUE_LANE set) and keep
# its lease renewed, wait for the work, stop renewing, report the result
# with `finish`, and settle it when it succeeded. Stopped by a signal, give
# the lease back; told the lane was cancelled, stop its work and go on.
run_lane() {
    local slug="$1" issue="$2" token="$3"
    local lane="$LANES/$slug"

    # `claim` has already marked the lane running (with our holder, token and
    # expiry): from now on no runner is handed it while our lease is live,
    # and it keeps the storm from looking empty; a `bump` or `push` made
    # meanwhile changes only what starts after it.
    if [[ -n "${RUNNER_LOG:-}" ]]; then
        printf '%s\n' "$slug" >>"$RUNNER_LOG"
    fi
    say "running $slug (issue $issue, token $token)"

    # 1. Renew at least every third of the lease's length.
    local ttl every renewer
    ttl="$(lease_seconds "$slug")"
    every="$(awk -v t="$ttl" -v r="${RUNNER_RENEW:-}" 'BEGIN { e = t / 3; if (r != "" && r + 0 > 0 && r + 0 < e) e = r + 0; printf "%.3f\n", e }')"
    stop_now "$slug" "$token"

    # 2. Do the work, in the lane's directory, with STORM_QUEUE_LANE exported:
    #    storm-queue refuses any priority request from a process that carries
    #    it, so a lane cannot reorder the queue it runs in. It runs in the
    #    background, in a process group of its own (`set -m`: so a stop can
    #    reach every process it started, and Ctrl-C at a terminal reaches
    #    only the runner, which stops it), and the runner waits for it.
    mkdir -p "$lane"
    CANCELLED=0
    rm -f "$ERRORS/ended"
    set -m
    if [[ -x "$lane/run.sh" ]]; then
        (cd "$lane" && export STORM_QUEUE_LANE="$slug" && exec ./run.sh) </dev/null &
    else
        (cd "$lane" && export STORM_QUEUE_LANE="$slug" && exec bash -c "${LANE_COMMAND:-true}") </dev/null &
    fi
    LANE_PID=$!
    set +m
    keep_alive "$slug" "$token" "$every" &
    renewer=$!
    local watcher
    watch_lease "$slug" "$token" &
    watcher=$!
    if [[ $STOP -ne 0 ]]; then  # a signal that came before LANE_PID was known
        stop_lane
    fi
    reap "$LANE_PID"
    local status=$REAPED
    LANE_PID=""
    if [[ -n "$KILLER" ]]; then  # it ends once the lane's whole group has (SIGKILL after the grace)
        reap "$KILLER"
        KILLER=""
    fi

    # 3. Stop renewing and waiting on the lease, and wait until both have
    #    really gone, before finishing: the token is spent once `finish`
    #    is accepted.
    kill -TERM "$renewer" "$watcher" 2>/dev/null || true
    reap "$renewer"
    reap "$watcher"

    # Stopped by a signal: the work was cut short; give the lease back.
    stop_now "$slug" "$token"
    if [[ $CANCELLED -eq 1 ]]; then
        local ended=""
        if [[ -f "$ERRORS/ended" ]]; then  # the watcher's answer: `ENDING SLUG TOKEN: how`
            ended="$(<"$ERRORS/ended")"
            rm -f "$ERRORS/ended"
        fi
        case "$ended" in
            "") say "stopped the work of $slug: the lane was cancelled (storm-queue why $slug --root $ROOT_WORD says by whom and why)" ;;
            "cancelled "*) say "stopped the work of $slug: the lane was cancelled ${ended#*: }" ;;
            *) say "lost the lease on $slug (token $token): ${ended#*: }; stopped its work, and reports nothing for it" ;;
        esac
        CANCELLED=0
        return 0
    fi

    # 4. Report the result. `finish --result ok` writes result.json and
    #    removes the running marker in one step: the lane goes from running
    #    to finished with no moment in between where it looks ready.
    #    `--result failed` spends the attempt: the lane is claimable again
    #    (by any runner; after the storm's backoff, when `[runner]
    #    retry_delay` declares one), and after `[runner] attempts` attempts
    #    storm-queue quarantines it until the operator's `unpark`. So a
    #    failed lane is not abandoned, nor scheduled, here.
    #    When this runner has nothing to do between the finish and its
    #    next claim (it does not settle the lane itself, and runs on), the
    #    finish claims the next lane in the same request (`finish
    #    --then-claim`: one request, one hold of the storm's lock, the
    #    claim's lines right after the finish's), and the main loop takes
    #    that claim's decision instead of asking again.
    local result=ok answer rc then=()
    [[ $status -eq 0 ]] || result=failed
    if [[ $ONCE -eq 0 && ( $result != ok || $SETTLES -eq 0 ) ]]; then
        then=(--then-claim "${CLAIM_FLAGS[@]}" "${TTL_FLAGS[@]}")
    fi
    while true; do
        rc=0
        answer="$(sq finish "$slug" --token "$token" --result "$result" --note "exit $status" "${then[@]}" \
            --root "$ROOT" --json)" || rc=$?
        case "$rc" in
            0)
                busy_over
                if [[ ${#then[@]} -gt 0 ]]; then  # {"finish": {...}, "claim": {...}}: the claim's decision is next
                    NEXT_DECISION="$(sed -nE 's/.*"decision": "([^"\\]*)".*/\1/p' <<<"${answer#*'"claim": '}")"
                    answer="${answer%%'"claim": '*}"
                fi
                break
                ;;
            5) busy_again "finishing $slug" ;;  # nothing was recorded: asking again is safe
            2)
                if [[ "$answer" == *'"code": "lane_cancelled"'* ]]; then
                    say "$slug was cancelled while it ran: its result is not recorded (storm-queue why $slug --root $ROOT_WORD says by whom and why)"
                    return 0
                fi
                if [[ "$answer" == *stale_fence* ]]; then
                    # Our lease expired (we were too slow to renew, or were
                    # stopped) and the lane was handed out again, or the
                    # operator recovered it. Whatever we did is not the
                    # lane's result: the holder of the live lease decides it.
                    say "lost the lease on $slug (token $token is stale); not settling it"
                    return 0
                fi
                say "finish $slug refused: $answer"
                exit 2
                ;;
            *) exit "$rc" ;;
        esac
    done
    stop_now

    # 5. Settle it (the review step; see settle above) when this runner
    #    may; else leave it for the operator's review. A failed lane waits
    #    for the storm's own backoff, or its `unpark` once quarantined:
    #    `finish` said which.
    if [[ $result == ok && $SETTLES -eq 1 ]]; then
        settle "$slug" ok
    elif [[ $result == ok ]]; then
        say "$slug finished ok; it awaits the operator's review (storm-queue settle $slug integrated --root $ROOT_WORD, or abandoned)"
        LEFT_FOR_REVIEW=1
    elif [[ "$answer" == *'is quarantined after'* ]]; then
        say "$slug failed (exit $status) and is quarantined: its attempts are spent;" \
            "look at them (storm-queue why $slug --root $ROOT_WORD), then: storm-queue unpark $slug --reason TEXT --root $ROOT_WORD"
    else  # finish said when it is claimed again: after the storm's backoff, or at once
        local words
        words="$(sed -nE 's/.*"message": "([^"\\]*)".*/\1/p' <<<"$answer")"
        if [[ "$words" == "$slug failed (token $token); "* ]]; then
            say "$slug failed (exit $status, token $token); ${words#"$slug failed (token $token); "}"
        else
            say "$slug failed (exit $status): $words"
        fi
    fi
}

# A word as the shell reads it, for the commands the runner tells the
# operator to run: as it is when the shell takes it so; else in single
# quotes (so a URL's hidden password reads ***, not \*\*\*); a word that
# holds a character that is not printable, as printf %q writes it (a
# terminal never receives it raw).
shell_word() {
    local quoted
    quoted="$(printf '%q' "$1")"
    if [[ "$quoted" == "$1" || "$1" == *[![:print:]]* ]]; then
        printf '%s' "$quoted"
    else
        printf "'%s'" "${1//\'/\'\\\'\'}"
    fi
}

# The root, absolute, as a shell word: for the commands the runner tells
# the operator, who may be anywhere.
# A database URL is shown with any password hidden, as storm-queue shows it.
if [[ $DATABASE -eq 1 ]]; then
    ROOT_WORD="$(shell_word "$(sed -E 's#^(postgres(ql)?://[^:@/]*):[^@/]*@#\1:***@#; s#([?&]password=)[^&]*#\1***#' <<<"$ROOT")")"
else
    ROOT_WORD="$(shell_word "$(cd "$ROOT" 2>/dev/null && pwd || printf '%s' "$ROOT")")"
fi

# Whether this runner may settle a lane (the review), as the storm judges
# it (`storm-queue whoami`): the operator may, and a declared source; a
# database storm's runner role may not, and then never asks to.
SETTLES=0
LEFT_FOR_REVIEW=0  # 1 once it left a lane it finished for the operator's review
learn_who() {
    local who rc
    while true; do
        rc=0
        who="$(sq whoami --root "$ROOT" --json)" || rc=$?
        case "$rc" in
            0) busy_over; break ;;
            5) busy_again "asking who it is" ;;
            *) exit "$rc" ;;
        esac
    done
    if [[ "$who" == *'"settles": true'* ]]; then
        SETTLES=1
        return 0
    fi
    if [[ "$who" == *'"may": []'* ]]; then
        return 0  # it may request nothing: its claim is refused, saying why
    fi
    local by
    by="$(sed -nE 's/^\{"by": "(([^"\\]|\\.)*)".*/\1/p' <<<"$who")"  # as JSON escapes it: never raw
    say "runs as $by, which may not settle a lane: the lanes it finishes await the operator's review" \
        "(storm-queue settle SLUG integrated --root $ROOT_WORD, or abandoned)"
}
learn_who

# When the answer is `wait`: is anything going to change by itself? If a
# lane is running under a lease (live, or orphaned: a claim takes it back)
# or scheduled, yes: print nothing; so too when a lane is ready and no
# running marker without a lease holds a [runner] slot (it became ready
# since the claim: the next claim takes it). Otherwise print what holds the
# storm up, one lane a line, with the command that unblocks it; nothing
# either when `list` says review by now (a claim that marks a lane blocked
# answers on the state before the mark, so the next claim reviews it). It reads `list --plain` (its `next:` line, and the
# documented columns: POSITION PRIORITY SLUG ISSUE STATE BY AT DETAIL, the
# detail already escaped by storm-queue).
stuck_report() {
    local rows
    rows="$(sq list --plain --root "$ROOT" 2>/dev/null)" || return 0
    ROOT_WORD="$ROOT_WORD" DATABASE="$DATABASE" awk '
        BEGIN { root = ENVIRON["ROOT_WORD"]; db = ENVIRON["DATABASE"] == "1" }
        # lanes to review by now (the claim that marked a lane blocked
        # answered on the state before the mark): the next claim reviews them
        $1 == "next:" { if ($2 == "review") { moving = 1; exit } next }
        $1 !~ /^[0-9]+$/ { next }
        {
            slug = $3; state = $5; detail = ""
            for (i = 8; i <= NF; i++) detail = detail (i > 8 ? " " : "") $i
        }
        state == "scheduled" || (state == "running" && detail !~ /^running by a marker with no lease/) {
            moving = 1; exit
        }
        state == "ready" {
            ready = 1
            out = out sprintf("  %s: ready, but every [runner] slot is taken\n", slug); next
        }
        state == "quarantined" {
            sub(/ \(the operator.s unpark [^)]*\)/, "", detail)
            out = out sprintf("  %s: %s; look at its attempts (storm-queue why %s --root %s), then: storm-queue unpark %s --reason TEXT --root %s\n", slug, detail, slug, root, slug, root); next
        }
        state == "held" {
            out = out sprintf("  %s: %s --root %s\n", slug, detail, root); next
        }
        state == "running" {
            marker = 1
            out = out sprintf("  %s: %s; if no runner is working on it: storm-queue recover %s --force --reason TEXT --root %s\n", slug, detail, slug, root); next
        }
        state == "finished" && db {
            out = out sprintf("  %s: %s (unattended is declared, so runners leave it to you): settle it: storm-queue settle %s integrated --root %s (or abandoned)\n", slug, detail, slug, root); next
        }
        state == "blocked" && db {
            out = out sprintf("  %s: %s; it can never run: storm-queue settle %s abandoned --root %s\n", slug, detail, slug, root); next
        }
        detail ~ /unknown to queue\.txt/ && db {
            out = out sprintf("  %s: %s: add the missing lane (storm-queue add SLUG ISSUE --root %s)\n", slug, detail, root); next
        }
        state == "finished" {
            out = out sprintf("  %s: %s (UNATTENDED is set, so runners leave it to you): settle it by adding %s to %s/integrated.txt or %s/abandoned.txt\n", slug, detail, slug, root, root); next
        }
        state == "blocked" {
            out = out sprintf("  %s: %s; it can never run: take its line out of queue.txt, or add %s to %s/abandoned.txt\n", slug, detail, slug, root); next
        }
        detail ~ /unknown to queue\.txt/ {
            out = out sprintf("  %s: %s: add the missing lane to queue.txt, or correct the line of %s\n", slug, detail, slug); next
        }
        { out = out sprintf("  %s: %s\n", slug, detail) }
        END { if (!moving && !(ready && !marker)) printf "%s", out }
    ' <<<"$rows"
}

# Whether every lane not settled is finished, awaiting review (and at
# least one is): `list --plain`'s STATE column (its fifth), on the lines
# of lanes.
only_reviews_left() {
    local rows
    rows="$(sq list --plain --root "$ROOT" 2>/dev/null)" || return 1
    awk '$1 ~ /^[0-9]+$/ { lanes++; if ($5 != "finished") other = 1 } END { exit !(lanes > 0 && !other) }' <<<"$rows"
}

# Say what holds the storm up once, and again only when it changes.
STUCK_SAID=""
HALT_SAID=""
REVIEW_SAID=""  # the lanes to review this runner (which may not settle) last said it waits for
MODE_SAID=""  # 1 once it said whether the storm is attended or not
say_if_stuck() {
    local report
    report="$(stuck_report)" || return 0  # a signal ended it: the loop acts on the signal
    if [[ -z "$report" ]]; then
        STUCK_SAID=""
        return 0
    fi
    if [[ "$report" != "$STUCK_SAID" ]]; then
        say "nothing can run, and nothing will change by itself: the storm waits for you"
        while IFS= read -r line; do say "$line"; done <<<"$report"
        if [[ $ONCE -eq 1 ]]; then
            say "exiting (--once)"
        else
            say "waiting for the storm to change (claim --wait ${WAIT_FOR}); this is said once, until it changes"
        fi
        STUCK_SAID="$report"
    fi
}

# Whether the next claim waits for a change (`claim --wait`): after a
# `wait` or `halted`, until it is answered otherwise.
CLAIM_WAITS=0
# The decision of the claim the last finish made (`finish --then-claim`),
# taken next instead of a claim of its own; empty: ask.
NEXT_DECISION=""
while true; do
    # Ask for the one decision. Busy or unreachable (5) is asked again
    # after a growing pause; any other failure (unknown order: 3, no storm:
    # 2, a crash: 4) stops the runner with its status, storm-queue having
    # said why on stderr.
    stop_now
    rc=0
    if [[ -n "$NEXT_DECISION" ]]; then  # the claim a finish --then-claim made
        decision="$NEXT_DECISION"
        NEXT_DECISION=""
    elif [[ $CLAIM_WAITS -eq 1 ]]; then
        claim_waiting --root "$ROOT" "${CLAIM_FLAGS[@]}" "${TTL_FLAGS[@]}" || rc=$?
        decision="$DECISION"
    else
        decision="$(sq claim --root "$ROOT" "${CLAIM_FLAGS[@]}" "${TTL_FLAGS[@]}")" || rc=$?
    fi
    if [[ $STOP -ne 0 && $rc -eq 0 && "$decision" == "run "* ]]; then
        read -r _ slug _ token <<<"$decision"
        stop_now "$slug" "$token"  # the lease just taken goes back at once
    fi
    stop_now
    if [[ $rc -eq 5 ]]; then
        busy_again claiming
        continue
    elif [[ $rc -ne 0 ]]; then
        exit "$rc"
    fi
    busy_over
    read -r verb rest <<<"$decision" || true
    CLAIM_WAITS=0
    [[ "$verb" == halted ]] || HALT_SAID=""
    [[ "$verb" == review ]] || REVIEW_SAID=""
    if [[ $LEFT_FOR_REVIEW -eq 1 && "$verb" != review && -z "$MODE_SAID" ]]; then
        # a lane it left for review holds nothing up: the storm is unattended
        say "the storm is unattended: this runner goes on with the next lanes, and the lanes it finished await" \
            "the operator's review"
        MODE_SAID=1
    fi
    case "$verb" in
        run)
            # run SLUG ISSUE TOKEN: we hold a lease on the first ready lane
            # in run order, with fencing token TOKEN.
            read -r slug issue token <<<"$rest"
            STUCK_SAID=""
            run_lane "$slug" "$issue" "$token"
            ;;
        review)
            # review SLUG...: finished lanes await review (the storm is
            # attended: no UNATTENDED). This runner settles them when it
            # may; else they are the operator's, and it says so once (again
            # when the lanes to review change) and waits for the review:
            # its `claim --wait` waits a review out, as it waits out `wait`.
            STUCK_SAID=""
            if [[ $SETTLES -eq 1 ]]; then
                for slug in $rest; do
                    settle "$slug"
                done
            else
                if [[ "$rest" != "$REVIEW_SAID" ]]; then
                    say "the storm is attended: $rest await(s) the operator's review (storm-queue settle SLUG integrated" \
                        "--root $ROOT_WORD, or abandoned); $([[ $ONCE -eq 1 ]] && printf 'exiting (--once)' ||
                            printf 'waiting for the review (claim --wait %s); this is said once, until the lanes to review change' "$WAIT_FOR")"
                    REVIEW_SAID="$rest"
                    MODE_SAID=1
                fi
                if [[ $ONCE -eq 1 ]]; then
                    exit 0
                fi
                CLAIM_WAITS=1
                continue
            fi
            ;;
        wait)
            # wait [SLUG...]: lanes are pending (running under other leases,
            # all slots taken, waiting on lanes still to be integrated or on
            # their scheduled time, or quarantined until the operator's
            # `storm-queue unpark`) but none can be claimed now; look again
            # later, with a claim that waits for the storm to change. An
            # orphaned lease is taken back by a later claim. When every lane
            # left is finished (the slugs: a batch review under
            # UNATTENDED), nothing more can run for this runner: say so
            # and exit 0, as on `empty`. When nothing will change by
            # itself, say so (once).
            if [[ -n "$rest" ]] && only_reviews_left; then
                [[ $ONCE -eq 1 ]] || say "nothing more can run: every lane left ($rest) awaits the operator's review" \
                    "(storm-queue settle SLUG integrated --root $ROOT_WORD, or abandoned)"
                exit 0
            fi
            say_if_stuck
            if [[ $ONCE -eq 1 ]]; then
                exit 0
            fi
            CLAIM_WAITS=1
            ;;
        halted)
            # The operator halted the storm (storm-queue halt): nothing is
            # leased until storm-queue resume; claim named who halted it,
            # when and why on stderr. Leases this runner holds run on.
            if [[ -z "$HALT_SAID" ]]; then
                say "the storm is halted by its operator; waiting for storm-queue resume (claim --wait ${WAIT_FOR})"
                HALT_SAID=1
            fi
            if [[ $ONCE -eq 1 ]]; then
                exit 0
            fi
            CLAIM_WAITS=1
            continue
            ;;
        empty)
            # Nothing pending, nothing to review: done. (A lane running
            # under another runner's lease keeps the storm from being empty,
            # so `empty` never comes while another runner still works.)
            # With --once (cron) there is nothing worth a mail: say nothing.
            [[ $ONCE -eq 1 ]] || say "storm is empty"
            exit 0
            ;;
        *)
            say "unexpected decision from storm-queue claim: $decision"
            exit 2
            ;;
    esac
    if [[ $ONCE -eq 1 ]]; then
        exit 0
    fi
done
