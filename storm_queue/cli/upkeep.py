"""The operator's upkeep commands in the one table (``commands.COMMANDS``):
setting a storm up and carrying it (init, migrate, upgrade, declare, grant,
revoke, adopt, reset), auditing it (verify, doctor), the demo and shell
completion. Nothing here imports click."""

from __future__ import annotations

from ..core.exit_codes import epilog
from .params import (
    AWAY, DRY_RUN, JSON, KEEP_INTACT, KEY, MEMBERSHIP, REQUEST, RESET_DRY_RUN, ROOT, SLUG, WAIT, Command, Param,
)

UPKEEP = (
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
