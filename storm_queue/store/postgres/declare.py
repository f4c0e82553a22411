"""``storm-queue declare FILE`` on a database storm: the file's text
becomes the storm's declaration, recorded with its sha256 and parsed
content. A mixin of ``database.DatabaseStorm``."""

from __future__ import annotations

from ...core import config
from ...core.errors import NoStorm, NotHere
from ...core.framing import sha256
from ...core.lane import Snapshot
from ...core.outcome import Outcome
from .queries import q


class Declaring:
    """The declaration request of a database storm."""

    def declare(self, path: str, reason: str | None = None, key: str | None = None) -> Outcome:
        """Record the file at ``path`` as the storm's declaration (operator only)."""
        import json
        import tomllib

        from ...core.outcome import Request, Step
        from ...core.shapes import optional_text

        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as exc:
            raise NoStorm(f"cannot read {path} ({exc.strerror}); nothing was declared") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidDeclaration(f"{path} is not UTF-8 text; nothing was declared") from None
        decl = config.parse(text)
        if decl.error:
            raise InvalidDeclaration(f"{path}: {decl.error}; nothing was declared")
        content = json.loads(json.dumps(tomllib.loads(text), default=str))
        sha = sha256(raw).hexdigest()
        req = Request("declare", None, optional_text(reason), None, optional_text(key), (sha,))

        def plan(snap: Snapshot, by: str):
            current = self.conn.execute(q("read_declaration_sha256")).fetchone()[0]
            body = {"action": "declare", "sha256": sha, "declaration": content}
            if current == sha:
                body["noop"] = "the storm already holds this declaration"
                return Step(Outcome("noop", "declare", None, by, message=f"nothing to do: {body['noop']}"), [body])

            def before() -> None:
                self.conn.execute(q("write_declaration"), (text, sha))

            return Step(Outcome("done", "declare", None, by, message=f"the storm's declaration is now {path} (sha256 {sha[:16]})"),
                        [body], before=before)

        return self._request(req, None, plan, operator_only=True)


class InvalidDeclaration(NotHere):
    """A file ``declare`` cannot record: nothing changed (exit 2)."""
