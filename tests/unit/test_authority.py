"""authority.exposure: the one rule for a storm file anyone else could forge."""

import os

from storm_queue.store.directory.accounts import Owner, exposure


def _stat(mode: int, uid: int) -> os.stat_result:
    return os.stat_result((mode, 0, 0, 1, uid, 0, 0, 0, 0, 0))


OP = Owner(uid=1000, gid=1000, name="op", what="queue.txt")


def test_sound_file_has_no_exposure():
    assert exposure(_stat(0o100644, 1000), OP) == []


def test_group_and_other_write_are_both_named():
    assert exposure(_stat(0o100666, 1000), OP) == ["writable by its group", "writable by others"]


def test_other_owner_is_named():
    found = exposure(_stat(0o100644, 0), OP)
    assert len(found) == 1 and found[0].startswith("owned by ") and found[0].endswith("not by the operator op")
