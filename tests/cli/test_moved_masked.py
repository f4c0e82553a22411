"""A storm that moved says where, with any password masked (issue 33,
item 6): a ``migrate`` line an earlier release wrote with the URL's
password in it is shown masked by every read document and view."""

from __future__ import annotations

import json

from tests.conftest import make_storm, run_cli, run_main, write_log

URL = "postgresql://op:s3cret%2Fpw@db.example/storm"
SHOWN = "postgresql://op:***@db.example/storm"


def test_the_password_an_earlier_release_recorded_is_masked_everywhere(tmp_path) -> None:
    root = make_storm(tmp_path / "storm", "a 1\nb 2\n")
    write_log(root, [{"action": "bump", "slug": "b", "issue": "2", "deps": [], "moved": ["b"], "removed": []},
                     {"action": "migrate", "to": URL}])
    for ask in (("list", "--json"), ("why", "a", "--json"), ("next", "--json"), ("doctor", "--json"),
                ("verify", "--json")):
        done = run_cli(root, *ask)
        assert "s3cret" not in done.stdout + done.stderr, ask
        assert json.loads(done.stdout)["moved"] == SHOWN, ask
    log = run_cli(root, "log", "--json").stdout.splitlines()
    assert json.loads(log[-1]) == {"moved": SHOWN} and "s3cret" not in "\n".join(log)
    plain = run_cli(root, "list", "--plain")
    assert plain.stdout.splitlines()[0] == f"next: moved to {SHOWN}" and "s3cret" not in plain.stdout + plain.stderr
    watch = run_main(["watch", "--once", "--root", str(root)])
    assert watch.stdout.splitlines()[1] == f"next: moved to {SHOWN}" and "s3cret" not in watch.stdout
    doctor = run_cli(root, "doctor")
    assert doctor.returncode == 1 and "error   moved " in doctor.stdout and "s3cret" not in doctor.stdout
