"""The upgrade tests unpack an earlier release (``git archive``) with
``tests/archive.extract``, which must work on every Python the package
says it supports (``requires-python = ">=3.11"``): ``extractall(filter=)``
exists only from 3.11.4 (issue 33, item 11)."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.archive import extract

REPO = Path(__file__).resolve().parents[2]


def archive(tmp_path: Path) -> Path:
    path = tmp_path / "a.tar"
    with tarfile.open(path, "w") as tar:
        data = b"print('old release')\n"
        info = tarfile.TarInfo("pkg/mod.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def test_extract_uses_the_data_filter_where_python_has_one(tmp_path: Path) -> None:
    extract(archive(tmp_path), tmp_path / "out")
    assert (tmp_path / "out" / "pkg" / "mod.py").read_text() == "print('old release')\n"


def test_extract_works_on_a_python_before_3_11_4(tmp_path: Path, monkeypatch) -> None:
    """As 3.11.0 to 3.11.3 have it: no ``data_filter``, and an
    ``extractall`` that refuses a ``filter`` keyword."""
    plain = tarfile.TarFile.extractall

    def old_extractall(self, path=".", members=None, *, numeric_owner=False):
        return plain(self, path, members, numeric_owner=numeric_owner)

    monkeypatch.delattr(tarfile, "data_filter")
    monkeypatch.setattr(tarfile.TarFile, "extractall", old_extractall)
    extract(archive(tmp_path), tmp_path / "out")
    assert (tmp_path / "out" / "pkg" / "mod.py").read_text() == "print('old release')\n"


def test_extract_works_under_the_systems_python_too(tmp_path: Path) -> None:
    """A real process: the system's python3 (Debian 12's is 3.11.2, before
    the filter), when it is 3.11 or newer, as the package requires."""
    system = Path("/usr/bin/python3")
    python = str(system) if system.exists() else sys.executable
    version = subprocess.run([python, "-c", "import sys; print(sys.version_info >= (3, 11))"], capture_output=True,
                             text=True, timeout=60).stdout.strip()
    python = python if version == "True" else sys.executable
    done = subprocess.run([python, "-c", "import sys; sys.path.insert(0, sys.argv[1]); from tests.archive import "
                           "extract; extract(sys.argv[2], sys.argv[3])", str(REPO), str(archive(tmp_path)),
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "pkg" / "mod.py").exists()
