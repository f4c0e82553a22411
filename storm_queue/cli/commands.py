"""The one table of commands: each command's name, help, exit codes,
arguments and options (types, defaults, help), and the function that does
it. Both command lines are made from it: ``cli`` builds the click commands
(help, completion, usage errors), ``entry`` parses the ordinary forms
without loading click. Nothing here imports click."""

from __future__ import annotations

from ..core.exit_codes import epilog
from ..core.framing import ACTIONS
from .params import (  # noqa: F401 -- Command, Param and the helps: the table's parts, where app and tests look
    ADD_LANE, AWAY, CLAIM_WAIT, FINISH_WAIT, THEN_CLAIM, LEASE_WAIT, DEPS, DRY_RUN, FROM, ISSUE, JSON, JSON_HELP, KEY, NOT_BEFORE, OUTPUT, READ, REQUEST,
    REQUEST_CODES, ROOT, ROOT_HELP, RUNNER_CODES, SEEN_READ, SERVE, SERVE_CODES, SETTLE, SLUG, TOKEN, WHEN, Command,
    Param, ttl,
)
from .upkeep import UPKEEP

COMMANDS = (
    Command("list", """Show the order the storm will run, each lane's state, and why.

At a terminal, a table; when stdout is not a terminal, NO_COLOR is set
or --plain is given, one lane a line: POSITION PRIORITY SLUG ISSUE STATE
BY AT DETAIL (see docs/commands.md).

Example: storm-queue list --root ~/storms/spring

Example: storm-queue list --plain | awk '$2 == "*" {print $3}'""",
            epilog((0, "the listing was printed"), READ, 3, 4, AWAY),
            (Param("plain", "--plain", "flag", help="Plain text, one lane a line, even at a terminal."),
             Param("show_all", "--all", "flag", help="List settled lanes too (by default they are counted)."),
             Param("states", "--state", metavar="STATE[,STATE...]",
                   help="Only the lanes in these states: ready, waiting, cycle, blocked, scheduled, held, quarantined, "
                        "running, finished, settled."),
             JSON, ROOT), "handlers:show_list"),
    Command("log", """Show the recorded requests, oldest first, one line each.

Each line: seq, time, who, the action and lane, what moved, the outcome
(done, noop, refused with its code) and the reason. With --json, the
matching events as JSON lines, byte for byte as the log stores them.

Example: storm-queue log --refused --since 2026-11-30

Example: storm-queue log --slug billing --last 5""",
            epilog((0, "the matching events were printed"), READ,
                       (3, "the log is damaged: the lines before the damage, then the damage"), 4, AWAY),
            (Param("slugs", "--slug", metavar="SLUG", multiple=True, complete="slug",
                   help="Only events that name SLUG (as the lane asked for, or among those moved or removed). Repeatable."),
             Param("by", "--by", metavar="WHO", multiple=True,
                   help="Only events by WHO: a principal (operator:alice, source:bot) or the name after its colon. Repeatable."),
             Param("actions", "--action", "choice", multiple=True, choices=ACTIONS,
                   help="Only this action (a refusal counts as the verb it refused, too). Repeatable."),
             Param("refused", "--refused", "flag", help="Only refused requests."),
             Param("since", "--since", "time", "TIME", "Only events at or after TIME: a date (2026-11-30, midnight UTC) "
                   "or RFC 3339 (2026-11-30T14:05:00Z)."),
             Param("last", "--last", "int", "N", "Only the last N matching events.", low=0),
             Param("as_json", "--json", "flag", help="Write the matching events as JSON lines, one event a line, "
                   "byte for byte as the log stores them."), ROOT), "handlers:show_log"),
    Command("why", """Say where SLUG stands and why, in plain words.

Its state, its position, what runs before it, the dependencies it waits
on, who prioritised it and why, and whether it is stray or skipped.

Example: storm-queue why billing""",
            epilog((0, "the answer was printed"), (2, "SLUG is unknown or not a name; no storm here; or a usage error"), 3, 4,
                   AWAY),
            (SLUG, JSON, ROOT), "handlers:show_why"),
    Command("whoami", """Say who you are to the storm, and what you may request.

First the principal your requests are recorded under (operator:NAME,
source:NAME, runner:ROLE, reader:ROLE, account:NAME, lane:"VALUE"), then
the requests the storm would admit, then why it refuses the rest. Reads
only. --json: {"by", "operator", "settles", "may", "refused"}.

Example: storm-queue whoami --json""",
            epilog((0, "the answer was printed"), READ, 4, AWAY),
            (Param("source", "--source", metavar="NAME", help="As the automation NAME, declared in storm.toml "
                   "[priority] sources."), JSON, ROOT), "handlers:whoami"),
    Command("watch", """Show the storm live, full screen, until q or Ctrl-C.

The decision next would give; the running lanes with holder, token and
the time left on each lease; the priority lane in run order with who
put each lane there and why; quarantined, scheduled and blocked lanes;
the last ten log events. Redrawn when the storm's files change (inotify
where available, else a check every --interval); a database storm is
read again every --interval. It reads only: no lock, nothing written.

When stdout is not a terminal, or with --once, one frame is printed and
watch exits; plain text when not at a terminal or NO_COLOR is set.
NO_COLOR also keeps colour out of the live view. SIGTERM exits 143.

Example: storm-queue watch --root ~/storms/spring --interval 5

Example: storm-queue watch --once | grep '^next:'""",
            epilog((0, "left with q, or the one frame was printed"), READ, 3, (4, "crashed"), AWAY, (130, "left with Ctrl-C")),
            (Param("interval", "--interval", "float", "SECONDS",
                   "How often to check the storm for change and redraw the time left on leases.", 2.0,
                   low=0.1, high=3600, show_default=True),
             Param("once", "--once", "flag", help="Print one frame and exit (what watch does when stdout is not a terminal)."),
             ROOT), "handlers:show_watch", top=("root",)),
    Command("metrics", """Print the storm's state as OpenMetrics text, for Prometheus.

Lanes by state, leases, the log's head, requests by outcome (docs/metrics.md).

Example: storm-queue metrics --output /var/lib/node_exporter/textfile/storm.prom""",
            epilog((0, "the metrics were printed or written"), SEEN_READ, 3, 4, AWAY), (OUTPUT, ROOT), "seen:metrics", top=("root",)),
    Command("serve", """Serve a read-only web view of the storm until Ctrl-C.

GET and HEAD only; loopback only unless --token-file (docs/serve.md).

Example: storm-queue serve --host 0.0.0.0 --token-file ~/.storm-token""",
            SERVE_CODES, (*SERVE, ROOT), "seen:serve", top=("root",), quick=False),
    Command("next", """Print the decision: run, review, wait, halted or empty.

One line: run SLUG ISSUE | review SLUG... | wait [SLUG...] | empty |
halted by WHO at TIME, reason "TEXT": the order (claim also waits while
every one of [runner] slots is held). Exit 2-5: the reason, on stdout too.

Example: storm-queue next""",
            epilog((0, "the decision was printed"), READ, 3, 4, AWAY), (JSON, ROOT), "answer:next_decision"),
    Command("bump", """Prioritise SLUG to run next after what is running.

It runs after lanes prioritised earlier, ahead of every other lane; its
unfinished dependencies are pulled forward with it.

Example: storm-queue bump e --reason "customer outage"

Example: storm-queue bump e --dry-run""", REQUEST_CODES, (SLUG, *REQUEST, DRY_RUN, JSON, ROOT), "answer:bump"),
    Command("push", """Enqueue SLUG ISSUE already prioritised.

Appends the lane to queue.txt (unless it is queued) and prioritises it.
With --not-before it is also scheduled: it keeps its place but does not
start before that time.

Example: storm-queue push z 26 --deps c,e

Example: storm-queue push nightly 30 --not-before 2026-12-01T02:00:00Z --key nightly-2026-12-01""",
            REQUEST_CODES, (SLUG, ISSUE, DEPS, NOT_BEFORE, *REQUEST, DRY_RUN, JSON, ROOT), "answer:push"),
    Command("unbump", """Take SLUG out of the priority lane.

Everything that no other prioritised lane requires leaves with it.

Example: storm-queue unbump e

Example: storm-queue unbump e --dry-run --json""", REQUEST_CODES, (SLUG, *REQUEST, DRY_RUN, JSON, ROOT), "answer:unbump"),
    Command("add", """Enqueue SLUG ISSUE, or --from FILE's lanes.

Not prioritised. On a directory storm it appends the line to queue.txt,
as push does; on a database storm it adds the lane's row. A slug already
queued is a recorded no-op.

With --from FILE (- for standard input), FILE holds lines as queue.txt
does, and is taken all or nothing: one bad line (a slug, issue or
dependency that is not one, a slug listed twice or already queued, a
dependency on no lane queued, settled or in FILE) refuses the whole batch,
naming the line (exit 2, recorded); else every lane is added in order,
one log line each, at once (one transaction on a database storm).

Example: storm-queue add api 13 --deps schema

Example: storm-queue add --from lanes.txt --key import-2026-12-02""", REQUEST_CODES,
            (*ADD_LANE, DEPS, FROM, *REQUEST, JSON, ROOT), "handlers:add"),
    Command("settle", """Settle SLUG, or a batch, as LEDGER: integrated or abandoned.

A live lease is refused (lane_running) unless --force. --finished settles
every lane finished now, --from FILE (- for stdin) the slugs of FILE, one
a line: one request, all or nothing (an unknown, unfinished or settled
slug refuses it, exit 2, recorded). --dry-run: what it would settle.

Example: storm-queue settle --finished integrated --dry-run""", REQUEST_CODES,
            (*SETTLE, *REQUEST, DRY_RUN, JSON, ROOT), "handlers:settle"),
    Command("waive", """Let SLUG run although its dependency DEP is not integrated.

Operator only, with --reason; recorded. A waived DEP that is abandoned
no longer blocks SLUG, and a waived DEP is not pulled forward when SLUG
is prioritised. --undo ends the waiver. why SLUG shows each waiver.

Example: storm-queue waive billing schema --reason "schema ships in the next release"

Example: storm-queue waive billing schema --undo --reason "schema is back in scope\"""",
            epilog(0, 1, (2, "refused: DEP is not a dependency SLUG's line names, a blank --reason; or a usage error"), 3, 4, 5),
            (SLUG, Param("dep", required=True, complete="slug"),
             Param("undo", "--undo", "flag", help="End the waiver: SLUG waits for DEP again."), *REQUEST, DRY_RUN, JSON, ROOT),
            "handlers:waive"),
    Command("claim", """Decide what starts now, within [runner] slots, and lease it.

One line: run SLUG ISSUE TOKEN | review SLUG... | wait [SLUG...] |
empty | halted (by WHO...). Only run takes a lease (recorded, with a fencing token greater
than any before it for that lane); it is wait while storm.toml
[runner] slots lanes are running. Leases past their expiry are taken
back first (recorded). With --wait SECONDS, a claim that would answer
wait or halted waits for a change that can make a lane claimable (a
finish, add, push, bump, settle, resume, waive, unpark, a lease expiring,
a schedule coming due), at most SECONDS, then answers as claim does; so
does review, to a caller who may not settle (a runner role). A wait on
finished lanes alone is answered at once: nothing more can run.

Example: storm-queue claim --holder runner-1 --ttl 900

Example: storm-queue claim --wait 60""",
            epilog((0, "done; a decision was printed"), 1,
                   (2, "refused: a TTL out of range, a holder that is not a name; or a usage error"), 3, 4,
                   (5, "busy: nothing changed, a retry is safe (the lock was held for longer than 30 s, or --wait "
                       "when longer, or the database cannot be reached)"),
                   (130, "interrupted by Ctrl-C (one that waited for work recorded nothing)")),
            (Param("holder", "--holder", metavar="NAME", help="Who holds the lease (default: this host and the runner's pid)."),
             ttl("storm.toml [runner] ttl, else 600"), KEY, CLAIM_WAIT, *REQUEST[2:], JSON, ROOT),
            "answer:claim_decision"),
    Command("lease", """Say whether the lease on SLUG is live, or wait for its end.

One line: live SLUG TOKEN: held by HOLDER until TIME, or ENDING SLUG
TOKEN: how, ENDING being cancelled (by whom, when, why), finished,
released, expired (taken back or not), recovered, settled (settle
--force), reset or superseded. Live means its renew would be admitted;
a halt or a migrate does not end a lease. With --wait SECONDS, a live
lease waits until it ends, woken as claim --wait is (at once), at most
SECONDS. Reads only: a runner waits in it beside the lane's work, to
stop the work when the lane is cancelled (examples/runner.sh).

Example: storm-queue lease e --token 3 --wait 60 --json""",
            epilog((0, "the lease has ended: the answer says how"), (2, "SLUG is not a name, TOKEN was never a "
                   "lease on it; no storm here, a storm file cannot be read, or a usage error"), 3, 4, AWAY,
                   (6, "the lease is live still: when --wait ran out, or at once without --wait")),
            (SLUG, TOKEN, LEASE_WAIT, JSON, ROOT), "handlers:lease"),
    Command("renew", """Extend the lease on SLUG held under TOKEN.

Only the live lease's token is accepted (else stale_fence), and no lease
lives past storm.toml [runner] max_lease_age from its claim.

Example: storm-queue renew e --token 3 --ttl 900""", RUNNER_CODES,
            (SLUG, TOKEN, ttl("the TTL it was claimed or last renewed with"), *REQUEST, JSON, ROOT), "handlers:renew"),
    Command("finish", """End the lease on SLUG held under TOKEN.

ok: the lane is finished and awaits review. failed: it is claimed again
later, until storm.toml [runner] attempts are spent; then it is
quarantined. A token that is not the live lease's is refused
(stale_fence) and recorded.

With --then-claim, then claim as claim does, in the same request: one
line, the claim's decision (run SLUG ISSUE TOKEN | review SLUG... |
wait [SLUG...] | empty | halted ...). A refused finish claims nothing
and exits as finish does. Under --key the pair is one request (its claim
line is keyed KEY/then-claim).

Example: storm-queue finish e --token 3 --result ok

Example: storm-queue finish e --token 3 --result ok --then-claim --holder runner-1""", RUNNER_CODES,
            (SLUG, TOKEN, Param("result", "--result", "choice", help="How the lane's work ended.", required=True, choices=("ok", "failed")),
             Param("note", "--note", metavar="TEXT", help="A note on the result; recorded."), *THEN_CLAIM, KEY,
             FINISH_WAIT, *REQUEST[2:], JSON, ROOT), "handlers:finish"),
    Command("release", """Give back the live lease on SLUG held under TOKEN.

For a runner that stops before the lane's work is done (examples/runner.sh
on SIGINT or SIGTERM): recorded; the lane may be claimed again at once,
and the attempt stays spent (the last one quarantines the lane). A token
that is not the live lease's is refused (stale_fence).

Example: storm-queue release e --token 3 --reason "runner stopped by SIGTERM\"""", RUNNER_CODES,
            (SLUG, TOKEN, *REQUEST, JSON, ROOT), "handlers:release"),
    Command("recover", """Take back orphaned leases (every one, or SLUG's).

A lease past its expiry is an orphan: its lane may be claimed again.
With SLUG (operator only), and --force --reason (its runner is gone),
end SLUG's live lease (its token refused from then on: stale_fence), or
its running marker with no lease (marker_running without --force: a
runner driven by next may be running it).

Example: storm-queue recover

Example: storm-queue recover e --reason "runner host lost\"

Example: storm-queue recover e --force --reason "host r1 was reinstalled\"""", RUNNER_CODES,
            (Param("slug", complete="slug"),
             Param("force", "--force", "flag", help="End SLUG's live lease or marker (its runner is gone); needs --reason."),
             *REQUEST, JSON, ROOT), "handlers:recover"),
    Command("cancel", """Cancel SLUG: it will not run, or stops running.

The operator or a declared source, with --reason; recorded as a cancel
line. A lane not yet settled is settled abandoned; a running lane's
lease is revoked too: a runner waiting on it (storm-queue lease) stops
the lane's work at once, and its next renew or finish is refused
(lane_cancelled, exit 2).
Cancelling a settled lane is a recorded no-op.

Example: storm-queue cancel e --reason "superseded by #42\"""", REQUEST_CODES,
            (SLUG, *REQUEST, JSON, ROOT), "handlers:cancel"),
    Command("unpark", """Return quarantined SLUG to the queue with fresh attempts.

Operator only, with --reason. The lane's attempt history stays.

Example: storm-queue unpark e --reason "flaky disk replaced\"""", RUNNER_CODES, (SLUG, *REQUEST, JSON, ROOT), "handlers:unpark"),
    Command("halt", """Halt the storm: no lane starts until resume.

Operator only, with --reason. While halted, claim leases nothing, claim
and next answer halted (by whom, when, why); leases already held run on
and may renew and finish. Halting a halted storm is a recorded no-op.

Example: storm-queue halt --reason "disk full on the build host\"""", RUNNER_CODES,
            (*REQUEST, DRY_RUN, JSON, ROOT), "handlers:halt"),
    Command("resume", """End the halt: lanes start again.

Operator only, with --reason. Resuming a storm that is not halted is
a recorded no-op.

Example: storm-queue resume --reason "disk cleaned\"""", RUNNER_CODES, (*REQUEST, DRY_RUN, JSON, ROOT), "handlers:resume"),
    Command("hold", """Hold SLUG: it is not started until unhold.

The operator or a declared source, with --reason. The lane keeps its place
in run order (state held, with who held it and why); next and claim pass
it over and the lanes that depend on it wait. A running lane runs on:
hold decides what starts, cancel stops. Holding a held lane is a recorded
no-op; a settled or unknown lane is refused.

Example: storm-queue hold billing --reason "waiting for the vendor's fix\"""", REQUEST_CODES,
            (SLUG, *REQUEST, DRY_RUN, JSON, ROOT), "handlers:hold"),
    Command("unhold", """End the hold of SLUG: it may start again, in its place.

The operator or a declared source, with --reason. Unholding a lane that
is not held is a recorded no-op.

Example: storm-queue unhold billing --reason "fix released\"""", REQUEST_CODES,
            (SLUG, *REQUEST, DRY_RUN, JSON, ROOT), "handlers:unhold"),
    Command("schedule", """Let SLUG start no earlier than --not-before TIME.

Until then it keeps its place in the run order and is passed over
(state scheduled). --not-before now lifts the schedule.

Example: storm-queue schedule e --not-before +2h""", RUNNER_CODES,
            (SLUG, Param("not_before", "--not-before", metavar="TIME", help=WHEN, required=True), *REQUEST, JSON, ROOT),
            "handlers:schedule"),
    *UPKEEP,
)

#: each command by name
BY_NAME = {c.name: c for c in COMMANDS}
