"""The parts every command of the table (``commands``) is made of: an
argument or option (``Param``), a command (``Command``), and the
arguments, options and exit-code lists many commands share. Nothing here
imports click."""

from __future__ import annotations

from ..core.exit_codes import epilog


class Param:
    """One argument (``flag`` None) or option (``flag`` "--name") of a
    command, passed to its function as the keyword ``name``. ``kind``:
    text, flag, int, float, choice, time (a ``log --since`` time), file (a
    path that is not a directory), root (a storm root as given). ``low``
    and ``high`` bound an int or float (``low_open``: strictly above);
    ``complete`` names what the shell completes (slug or deps). Not a
    record: every command makes the table's 70 entries, and a hand-written
    ``__init__`` makes them for 1.5 M instructions less than a record's."""

    __slots__ = ("name", "flag", "kind", "metavar", "help", "default", "required", "multiple", "choices", "low",
                 "low_open", "high", "complete", "show_default")

    def __init__(self, name: str, flag: str | None = None, kind: str = "text", metavar: str | None = None,
                 help: str | None = None, default: object = None, required: bool = False,  # noqa: A002
                 multiple: bool = False, choices: tuple[str, ...] = (), low: float | None = None,
                 low_open: bool = False, high: float | None = None, complete: str | None = None,
                 show_default: bool = False):
        self.name, self.flag, self.kind, self.metavar, self.help, self.default = name, flag, kind, metavar, help, default
        self.required, self.multiple, self.choices, self.low, self.low_open = required, multiple, choices, low, low_open
        self.high, self.complete, self.show_default = high, complete, show_default


#: every command that takes --reason takes the reason from a file too
REASON_FILE = Param("reason_file", "--reason-file", metavar="FILE",
                    help="Read the reason from FILE (- for standard input), in place of --reason.")


class Command:
    """A command: ``does`` ("module:function") is called with ``root``,
    ``as_json`` and each param by name, and returns the exit code.
    ``top`` is which options given before the command name it takes
    (root, json); ``quick`` is False for a command only click can run."""

    __slots__ = ("name", "help", "epilog", "params", "does", "top", "quick")

    def __init__(self, name: str, help: str, epilog: str, params: tuple[Param, ...], does: str,  # noqa: A002
                 top: tuple[str, ...] = ("root", "json"), quick: bool = True):
        at = next((n for n, p in enumerate(params) if p.name == "reason"), None)
        if at is not None:  # beside --reason
            params = (*params[:at + 1], REASON_FILE, *params[at + 1:])
        self.name, self.help, self.epilog, self.params, self.does, self.top, self.quick = \
            name, help, epilog, params, does, top, quick

    def function(self):
        """The function that does the command (``__import__``: ``importlib`` would load ``warnings``)."""
        module, name = self.does.split(":")
        return getattr(__import__(f"storm_queue.cli.{module}", fromlist=[name]), name)

    def call(self, **words: object) -> int:
        """Do the command with its parsed arguments (a ``--reason-file``
        read in as its reason); return its exit code."""
        path = words.pop("reason_file", None)
        if path is not None:
            from .answer import reason_from

            words["reason"] = reason_from(str(path), words.get("reason"))
        return self.function()(**words)


ROOT_HELP = ("The storm's root: a directory or a postgresql:// URL (default: $STORM_QUEUE_ROOT, else the nearest "
             "directory holding queue.txt or storm.toml).")
JSON_HELP = "Write JSON to stdout: one document (for log, JSON lines, one event a line)."
JSON = Param("as_json", "--json", "flag", help=JSON_HELP)
ROOT = Param("root", "--root", "root", "ROOT", help=ROOT_HELP)
SLUG = Param("slug", required=True, complete="slug")
ISSUE = Param("issue", required=True)
DEPS = Param("deps", "--deps", metavar="A,B", help="The lane's dependencies, comma-separated.", complete="deps")
#: add's lane, which --from FILE replaces
ADD_LANE = (Param("slug", complete="slug"), Param("issue"))
FROM = Param("from_file", "--from", "file", "FILE", "Add every lane of FILE (- for standard input), lines as in "
             "queue.txt, all or nothing.")
#: settle's lane and ledger, and the batch review's forms (--finished, --from FILE), which take LEDGER alone
SETTLE = (Param("slug", metavar="[SLUG]", complete="slug"),
          Param("ledger", kind="choice", metavar="LEDGER", choices=("integrated", "abandoned")),
          Param("finished", "--finished", "flag", help="Settle every lane finished now (then LEDGER alone)."),
          Param("from_file", "--from", "file", "FILE", "Settle FILE's slugs, one a line (- reads stdin; LEDGER alone)."),
          Param("force", "--force", "flag", help="Settle a lane that holds a live lease, expiring the lease first "
                "(recorded)."))
#: reset's own: keep what verifies, and its dry run
KEEP_INTACT = Param("keep_intact", "--keep-intact", "flag", help="Begin the new log with the old one's lines that "
                    "verify from line 1.")
RESET_DRY_RUN = Param("dry_run", "--dry-run", "flag", help="Show what would be kept and lost, and the run order after "
                      "it; write nothing.")
WAIT = Param("wait", "--wait", "float", "SECONDS", "How long to wait for another writer.", 30.0, low=0, high=86400,
             show_default=True)
#: claim's --wait: for work, not only for the lock (issue 21, item 4)
CLAIM_WAIT = Param("wait", "--wait", "float", "SECONDS",
                   "When nothing can be leased (wait, halted; review, for a caller who may not settle), wait up to "
                   "SECONDS for a change that can make a lane claimable, then answer as claim does; the writers' lock "
                   "is waited for up to 30 s, or SECONDS when longer.", 0.0, low=0, high=86400, show_default=True)
#: lease's --wait: for the lease to end (issue 33, item 4)
LEASE_WAIT = Param("wait", "--wait", "float", "SECONDS",
                   "While the lease is live, wait up to SECONDS for it to end (a cancel, finish, release, expiry, "
                   "recover), then answer; 0 answers at once.", 0.0, low=0, high=86400, show_default=True)
KEY = Param("key", "--key", metavar="KEY", help="An idempotency key: asked again with the same key and arguments, "
            "the first outcome is returned and nothing is recorded.")
#: what every request takes after its own params, in the order help lists them
REQUEST = (KEY, WAIT,
           Param("reason", "--reason", metavar="TEXT", help="Why you ask; recorded with the request."),
           Param("source", "--source", metavar="NAME", help="Ask as the automation NAME, declared in storm.toml [priority] sources."))
DRY_RUN = Param("dry_run", "--dry-run", "flag", help="Show what would move and the run order after it; record nothing.")
TOKEN = Param("token", "--token", "int", "TOKEN", "The fencing token the claim printed.", required=True, low=1)
WHEN = "Start no earlier than TIME: now, +N with s, m, h or d (+90m), a date (2026-12-01) or RFC 3339."
NOT_BEFORE = Param("not_before", "--not-before", metavar="TIME", help=WHEN)


def ttl(default: str) -> Param:
    return Param("ttl", "--ttl", "int", "SECONDS", f"The lease's time to live (default: {default}).", low=1)


#: finish's --wait: for the lock; with --then-claim, for work too, as claim's (issue 32, item 1)
FINISH_WAIT = Param("wait", "--wait", "float", "SECONDS",
                    "How long to wait for another writer (default 30). With --then-claim: when the claim leases "
                    "nothing, wait up to SECONDS for work after the finish is recorded, as claim --wait does "
                    "(default 0); the writers' lock is waited for up to 30 s, or SECONDS when longer.",
                    None, low=0, high=86400)
THEN_CLAIM = (Param("then_claim", "--then-claim", "flag", help="Then claim, in the same request: the finish's "
                    "lines, then the claim's (one hold of the lock; one transaction on a database). Prints the "
                    "claim's decision line; --json: {\"finish\": ..., \"claim\": ...}."),
              Param("holder", "--holder", metavar="NAME", help="With --then-claim: who holds the lease claimed "
                    "(default: this host and the runner's pid)."),
              ttl("storm.toml [runner] ttl, else 600; with --then-claim"))


#: the codes a request (bump, push, unbump, add, settle) can give
REQUEST_CODES = epilog(0, 1, 2, 3, 4, 5)
RUNNER_CODES = epilog((0, "done; for claim, a decision was printed"), 1,
                          (2, "refused: a stale token, a TTL out of range, a lane not in that state; or a usage error"),
                          3, 4, 5)
READ = (2, "no storm here, a storm file cannot be read, or a usage error")
#: a reader's and an init's 5: only a database storm is ever away
AWAY = (5, "a database storm's server cannot be reached; nothing was done, a retry is safe")


#: a grant's and a revoke's: the kind of role, the role, and the request's own
MEMBERSHIP = (Param("kind", kind="choice", required=True, choices=("runner", "reader")),
              Param("role", metavar="ROLE", required=True),
              Param("reason", "--reason", metavar="TEXT", help="Why; recorded with the request."),
              KEY, WAIT, JSON, ROOT)


#: ``metrics`` and ``serve`` (issue 34): where the metrics go, where the view listens, and their refusals
OUTPUT = Param("output", "--output", "file", "FILE", "Replace FILE atomically with the metrics, rather than print them.")
SERVE = (Param("host", "--host", metavar="HOST", help="The address to listen on.", default="127.0.0.1", show_default=True),
         Param("port", "--port", "int", "PORT", "The TCP port (0: any free one).", 8650, low=0, high=65535,
               show_default=True),
         Param("token_file", "--token-file", "file", "FILE",
               "Require 'Authorization: Bearer TOKEN' on every request, TOKEN being FILE's first line."))
SEEN_READ = (2, "no storm here, a storm file cannot be read, --output cannot be written, or a usage error")
SERVE_CODES = epilog((0, "never: it serves until stopped"),
                     (2, "no storm here, a --host that is not loopback without --token-file, a token file refused, an "
                         "address that cannot be bound, or a usage error"),
                     3, 4, AWAY, (130, "stopped with Ctrl-C"), (143, "stopped with SIGTERM"))
