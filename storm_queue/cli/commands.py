"""The one table of commands: each command's name, help, exit codes,
arguments and options (types, defaults, help), and the function that does
it. Both command lines are made from it: ``cli`` builds the click commands
(help, completion, usage errors), ``entry`` parses the ordinary forms
without loading click. Nothing here imports click."""

from __future__ import annotations

from ..core.exit_codes import epilog
from ..core.framing import ACTIONS
from .params import (  # noqa: F401 -- Command and Param: the names of the table's parts, where app and tests look
    ADD_LANE, AWAY, CLAIM_WAIT, DEPS, DRY_RUN, FROM, ISSUE, JSON, JSON_HELP, KEEP_INTACT, KEY, MEMBERSHIP, NOT_BEFORE,
    OUTPUT, READ, REQUEST, REQUEST_CODES, RESET_DRY_RUN, ROOT, ROOT_HELP, RUNNER_CODES, SEEN_READ, SERVE, SERVE_CODES,
    SETTLE, SLUG, TOKEN, WAIT, WHEN, Command, Param, ttl,
)

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
                   help="Only the lanes in these states: ready, waiting, cycle, blocked, scheduled, quarantined, "
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
    Command("declare", """Record FILE as a database storm's declaration (operator only).

The file is read as storm.toml is ([priority] sources, [runner]); the
log records its sha256 and parsed content, and every host then reads
the declaration from the database. On a directory storm, storm.toml is
the declaration: declare refuses (exit 2).

Example: storm-queue declare storm.toml --root postgresql://operator@db.example/storm""",
            epilog((0, "the declaration was recorded (or was already the storm's)"), 1,
                       (2, "a malformed FILE, a directory storm, or a usage error; nothing changed"), 4, 5),
            (Param("file", kind="file", required=True),
             Param("reason", "--reason", metavar="TEXT", help="Why you declare it; recorded with the request."),
             Param("key", "--key", metavar="KEY", help="An idempotency key."), WAIT, JSON, ROOT), "handlers:declare"),
    Command("reset", """Start a new log when the old one cannot be replayed.

Operator only, a directory storm (a database's backup restores its log),
refused while the log replays. The old log is kept beside it; with
--keep-intact the new one begins with its lines that verify from line 1.
Each line lost is named. --dry-run: what it would keep and lose.

Example: storm-queue reset --keep-intact --dry-run --reason "log cut short by a full disk\"""",
            epilog((0, "a new log was started (or would be: --dry-run)"), 1, (2, "refused: a blank --reason, the log "
                   "still replays, a database storm, or a usage error"), 4, 5),
            (KEEP_INTACT, *REQUEST, RESET_DRY_RUN, JSON, ROOT), "handlers:reset"),
    Command("adopt", """Take over a priority log written by the earlier priority tool.

Operator only. The old log is checked line by line, kept byte for byte
as priority.log.adopted-STAMP, and replayed: the new log's first line
records its lane in the same order, each lane with who put it there
and when. On a storm whose log is already storm-queue's: a recorded
no-op. With --dry-run: the lane it would adopt and the run order
after it; nothing is written.

Example: storm-queue adopt --reason "moving the storm to storm-queue\"""",
            epilog((0, "adopted, or a recorded no-op: the log is already storm-queue's"), 1,
                       (2, "refused: a blank --reason, or a usage error"),
                       (3, "the old log breaks its format (the line is named) or is shorter than its witness; nothing changed"), 4, 5),
            (DRY_RUN, *REQUEST, JSON, ROOT), "handlers:adopt"),
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

Example: storm-queue finish e --token 3 --result ok""", RUNNER_CODES,
            (SLUG, TOKEN, Param("result", "--result", "choice", help="How the lane's work ended.", required=True, choices=("ok", "failed")),
             Param("note", "--note", metavar="TEXT", help="A note on the result; recorded."), *REQUEST, JSON, ROOT), "handlers:finish"),
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
lease is revoked too, and its holder's next renew or finish is refused
(lane_cancelled, exit 2), which tells the runner to stop the lane's work.
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
    Command("schedule", """Let SLUG start no earlier than --not-before TIME.

Until then it keeps its place in the run order and is passed over
(state scheduled). --not-before now lifts the schedule.

Example: storm-queue schedule e --not-before +2h""", RUNNER_CODES,
            (SLUG, Param("not_before", "--not-before", metavar="TIME", help=WHEN, required=True), *REQUEST, JSON, ROOT),
            "handlers:schedule"),
    Command("verify", """Audit the whole priority log, naming the first bad line.

Checks every line's framing and schema, the chain from the first line,
seq without gaps, the witness, the checkpoint, and replays the log.
Exit 0 when sound, 3 when not. Reads only.

Example: storm-queue verify --json""",
            epilog((0, "the log is sound"), (2, "no storm here, or a usage error"),
                       (3, "the log is not sound (the first bad line is named), or its place is unknown"), 4, AWAY),
            (JSON, ROOT), "handlers:verify"),
    Command("demo", """Tell the whole story on a throwaway example storm.

It copies the bundled example storm to a temporary directory and shows
list, next, bump, push and unbump there with their real output.

Example: storm-queue demo""", epilog((0, "the story was told"), (2, "a usage error"), 4),
            (Param("keep", "--keep", "flag", help="Keep the throwaway storm and print where it is."),), "handlers:demo",
            top=(), quick=False),
    Command("init", """Create a storm in DIR (default: .) or a database URL.

DIR defaults to the current directory; a postgresql:// URL names a
PostgreSQL database instead.

Creates DIR when missing, an empty queue.txt, the ledgers integrated.txt
and abandoned.txt, and storm.toml from the commented example with every
setting commented out (no source declared). Files are 0644 and DIR 0755,
owned by you. Refuses, writing nothing, when any of them exists.

In a database, it creates the schema storm_queue and records the
first line; the connecting role becomes the storm's operator. A
database that holds a storm already is refused (exit 2).

Example: storm-queue init ~/storms/spring

Example: storm-queue init postgresql://operator@db.example/storm""",
            epilog((0, "the storm was created"), (2, "refused: a file exists, or DIR cannot be a storm; or a usage error"), 4,
                   AWAY),
            (Param("directory", metavar="[DIR|URL]", default="."), JSON), "handlers:init", top=("json",)),
    Command("migrate", """Carry the directory storm DIR into the empty database URL.

Lanes, ledgers, results, leases, the declaration and every line of
DIR's log (its seq and chain unbroken) go into the database; DIR then
records a last line naming URL. There, next and claim then exit 3 (the
order is kept in the database), other requests are refused (exit 2), and
list, why, log and doctor first say where the storm went. The database's
connecting role becomes the operator.

Example: storm-queue migrate ~/storms/spring postgresql://operator@db.example/storm""",
            epilog((0, "the storm was carried into the database"), (1, "refused: not the directory's operator"),
                       (2, "the database is not empty or refuses the login, DIR is not a storm, or a usage error"),
                       (3, "DIR's log cannot be replayed"), 4, 5),
            (Param("directory", metavar="DIR", required=True), Param("url", metavar="URL", required=True), JSON, WAIT),
            "handlers:migrate", top=()),
    Command("grant", """Admit a database ROLE as a runner or a reader (operator only).

KIND is runner or reader. A runner may claim, renew, finish and release leases by their token, recover
expired leases, and read; its lines are by runner:ROLE, and its other
requests are refused (not_operator, exit 1) and recorded. It holds no
write privilege on any table: it writes through functions the operator
owns. A reader may read, and nothing more. Granting what is granted is a
recorded no-op; a role the server does not know, exit 2.

Example: storm-queue grant runner ci_runner --root postgresql://operator@db.example/storm""",
            epilog((0, "the role was granted (or was already)"), (1, "refused: not the storm's operator"),
                   (2, "a role the server does not know, a directory storm, or a usage error"), 4, 5),
            MEMBERSHIP, "handlers:grant"),
    Command("revoke", """End what grant admitted a database ROLE as (operator only).

KIND is runner or reader. After revoke runner, the role's claims are refused (not_operator, exit
1); after revoke reader (and runner), it may not read the storm.
Revoking what is not granted is a recorded no-op; a role the server does
not know, exit 2.

Example: storm-queue revoke runner ci_runner --root postgresql://operator@db.example/storm""",
            epilog((0, "the role was revoked (or held nothing to revoke)"), (1, "refused: not the storm's operator"),
                   (2, "a role the server does not know, a directory storm, or a usage error"), 4, 5),
            MEMBERSHIP, "handlers:revoke"),
    Command("upgrade", """Upgrade the schema of the database storm URL (operator only).

URL, else --root or $STORM_QUEUE_ROOT, is carried forward to this storm-queue's version. Applies every pending migration in one transaction under
the storm's lock and records an upgrade line naming the versions from
and to; a storm at this version already is a recorded no-op. Until it
is upgraded, a storm an earlier storm-queue made answers every read,
and refuses every write (exit 2). Killed midway, the storm stays at its
old version, whole.

Example: storm-queue upgrade postgresql://operator@db.example/storm""",
            epilog((0, "the schema was upgraded (or was at this version already)"),
                   (1, "refused: not the storm's operator"),
                   (2, "a schema newer than this storm-queue's, a directory storm, or a usage error"), 4, 5),
            (Param("url", metavar="URL"),
             Param("reason", "--reason", metavar="TEXT", help="Why you upgrade; recorded with the request."),
             Param("key", "--key", metavar="KEY", help="An idempotency key."), WAIT, JSON, ROOT),
            "handlers:upgrade"),
    Command("doctor", """Audit the storm and say what to fix, one finding a line.

Each line is SEVERITY CODE SUBJECT: MESSAGE (fix: FIX). An error is a
storm that is unsafe or cannot work as declared: a file another account
could forge, a storm its owner cannot write, a log that does not replay,
a storm.toml that requests refuse. A warning needs a look: a skipped
queue.txt line, a stray slug, an unknown storm.toml key, a witness behind
its log, a torn tail, a lane marked running for longer than HOURS, an
orphaned lease, a running marker with no lease, a quarantined lane.
Doctor only reads.

Example: storm-queue doctor --running-hours 6""",
            epilog((0, "no findings: the storm is sound"), (1, "findings, one a line (not a refusal)"),
                       (2, "no storm here, or a usage error"), 4, AWAY),
            (Param("running_hours", "--running-hours", "float", "HOURS", "Report lanes marked running for longer than HOURS "
                   "(default: storm.toml [doctor] running_hours, else 24).", low=0, low_open=True), JSON, ROOT), "handlers:doctor"),
    Command("completion", """Print the shell completion script for bash, zsh or fish.

Sourced by the shell, it completes commands, options, and the slugs
queue.txt carries wherever a command takes a SLUG (and --deps, --slug).
Each Tab runs storm-queue, so it must be on PATH. Install once, then
open a new shell:

\b
  bash 4.4 or newer; the bash-completion package is not needed.
  Add to ~/.bashrc:
    eval "$(storm-queue completion bash)"
  zsh: its completion system (compinit) must be started first.
  Add to ~/.zshrc (without the first line if it already runs compinit):
    autoload -Uz compinit && compinit
    eval "$(storm-queue completion zsh)"
  fish: nothing else is needed. Run once:
    mkdir -p ~/.config/fish/completions
    storm-queue completion fish > ~/.config/fish/completions/storm-queue.fish

Example: storm-queue completion bash""", epilog((0, "the script was printed"), (2, "a usage error (an unknown SHELL)"), 4),
            (Param("shell", kind="choice", required=True, choices=("bash", "zsh", "fish")),), "handlers:completion",
            top=(), quick=False),
)

#: each command by name
BY_NAME = {c.name: c for c in COMMANDS}
