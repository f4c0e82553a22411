#!/usr/bin/env bash
# examples/runner.sh: a small but complete storm runner.
#
#   examples/runner.sh [STORM_ROOT]          (default: the current directory)
#
# It asks `storm-queue next` what to do, does exactly that, and asks again,
# until the storm is empty. It is what a real runner does, one lane at a
# time, minus the real work (which a lane supplies as an executable
# lanes/SLUG/run.sh, or which $LANE_COMMAND stands in for).
#
# Environment:
#   STORM_QUEUE    how to call storm-queue (default: storm-queue); it is
#                  split into words, so "python3 -m storm_queue" works
#   LANE_COMMAND   the work of a lane without lanes/SLUG/run.sh (default: true),
#                  run by bash in the lane's directory
#   RUNNER_POLL    seconds to sleep on `wait` (default: 1)
#   RUNNER_LOG     if set, a file that gets one slug a line as each lane starts
#
# Exit status: 0 when the storm is empty; otherwise storm-queue's own status
# (3: the priority order is unknown, and a runner must not guess at it; the
# operator repairs it with `storm-queue reset`).

set -euo pipefail

ROOT="${1:-.}"
STORM_QUEUE="${STORM_QUEUE:-storm-queue}"
POLL="${RUNNER_POLL:-1}"

say() { printf 'runner: %s\n' "$*" >&2; }

# Settle a finished lane from its result.json: "ok" is integrated (lanes that
# depend on it may now run); anything else ("failed", or "blocked", which
# `storm-queue next` writes for a lane whose dependency was abandoned) is
# abandoned. In a real storm a reviewer looks at the work first; this runner
# reviews by the exit status alone. The ledgers are plain files that
# storm-queue re-reads on every call, so an append is all it takes.
settle() {
    local slug="$1"
    local result="$ROOT/lanes/$slug/.qwenstorm/result.json"
    if grep -Eq '"status"[[:space:]]*:[[:space:]]*"ok"' "$result"; then
        printf '%s\n' "$slug" >>"$ROOT/integrated.txt"
        say "settled $slug: integrated"
    else
        printf '%s\n' "$slug" >>"$ROOT/abandoned.txt"
        say "settled $slug: abandoned"
    fi
}

# Run one lane: mark it running, do its work with STORM_QUEUE_LANE set,
# write its result, unmark it, settle it.
run_lane() {
    local slug="$1" issue="$2"
    local lane="$ROOT/lanes/$slug"
    local marks="$lane/.qwenstorm"

    # 1. Mark it running before any work starts. From now on `next` never
    #    chooses it again, and it keeps the storm from looking empty; a
    #    `bump` or `push` made meanwhile changes only what starts after it.
    mkdir -p "$marks"
    : >"$marks/running"
    if [[ -n "${RUNNER_LOG:-}" ]]; then
        printf '%s\n' "$slug" >>"$RUNNER_LOG"
    fi
    say "running $slug (issue $issue)"

    # 2. Do the work, in the lane's directory, with STORM_QUEUE_LANE exported:
    #    storm-queue refuses any priority request from a process that carries
    #    it, so a lane cannot reorder the queue it runs in. A failing lane
    #    must not stop the runner: `|| status=$?` keeps its exit status.
    local status=0
    if [[ -x "$lane/run.sh" ]]; then
        (cd "$lane" && export STORM_QUEUE_LANE="$slug" && ./run.sh) || status=$?
    else
        (cd "$lane" && export STORM_QUEUE_LANE="$slug" && bash -c "${LANE_COMMAND:-true}") || status=$?
    fi

    # 3. Write result.json (to a temporary file, then rename, so a reader
    #    sees the whole file or none), and only then remove the running
    #    marker: the lane goes from running to finished with no moment in
    #    between where it would look ready and be chosen again.
    local word=ok
    [[ $status -eq 0 ]] || word=failed
    printf '{"status":"%s","exit":%d}\n' "$word" "$status" >"$marks/.result.json.tmp"
    mv -f "$marks/.result.json.tmp" "$marks/result.json"
    rm -f "$marks/running"

    # 4. Settle it (the review step; see settle above).
    settle "$slug"
}

while true; do
    # Ask for the one decision. Under `set -e` a failing `next` (unknown
    # order: 3, no storm: 2, a crash: 4) stops the runner with its status.
    decision="$($STORM_QUEUE next --root "$ROOT")"
    read -r verb rest <<<"$decision" || true
    case "$verb" in
        run)
            # run SLUG ISSUE: the first ready lane in run order.
            read -r slug issue <<<"$rest"
            run_lane "$slug" "$issue"
            ;;
        review)
            # review SLUG...: finished lanes await review (no UNATTENDED).
            for slug in $rest; do
                settle "$slug"
            done
            ;;
        wait)
            # wait [SLUG...]: lanes are pending (running elsewhere, or waiting
            # on lanes under review) but none is ready; look again later.
            sleep "$POLL"
            ;;
        empty)
            # Nothing pending, nothing to review: done.
            say "storm is empty"
            exit 0
            ;;
        *)
            say "unexpected decision from storm-queue next: $decision"
            exit 2
            ;;
    esac
done
