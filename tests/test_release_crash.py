"""Crash safety of releases: atomic replacement, stale staging swept, an exclusive lock on the
target, fsync before the rename, and a full disk ending in a clean error."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import synthinfer.files as files
import synthinfer.release.writer as writer
from synthinfer.cli import app
from synthinfer.errors import ReleaseError
from synthinfer.release import open_release

sys.path.insert(0, str(Path(__file__).parent))
from test_release_bundle import _leftovers, _write  # noqa: E402

SRC = str(Path(writer.__file__).parents[2])
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 and /proc are Linux's")


class Killed(BaseException):
    """Stands for the process being killed: nothing after it runs."""


def _die(*a, **k):
    raise Killed


@linux_only
def test_overwrite_is_an_atomic_exchange(tmp_path, monkeypatch):
    path = _write(tmp_path / "rel")
    exchanged = []
    real = writer.exchange
    monkeypatch.setattr(writer, "exchange", lambda a, b: exchanged.append(real(a, b)) or exchanged[-1])
    seen, stop = set(), threading.Event()

    def read() -> None:  # the manifest at the path, read as fast as possible during the overwrites
        while not stop.is_set():
            try:
                seen.add(json.loads((path / "manifest.json").read_text())["n"])
            except FileNotFoundError:
                seen.add(None)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in (41, 40, 41, 40, 41):
            _write(tmp_path / "rel", n=n, overwrite=True)
    finally:
        stop.set()
        reader.join()
    assert exchanged == [True] * 5 and seen <= {40, 41} and seen
    assert open_release(path).n == 41 and _leftovers(tmp_path) == []


@linux_only
def test_a_kill_after_the_exchange_leaves_the_new_release_and_the_next_write_sweeps_the_old(tmp_path, monkeypatch):
    path = _write(tmp_path / "rel")
    with monkeypatch.context() as mp:
        mp.setattr(writer, "remove", _die)  # killed before the old release is removed
        with pytest.raises(Killed):
            _write(tmp_path / "rel", n=99, overwrite=True)
    assert open_release(path).n == 99
    (stale,) = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert open_release(stale).n == 40  # a complete release, hidden
    _write(tmp_path / "other")  # another target's write leaves it alone
    assert stale.exists()
    _write(tmp_path / "rel", n=7, overwrite=True)
    assert open_release(path).n == 7 and _leftovers(tmp_path) == []


def test_without_exchange_the_old_release_is_moved_aside_and_refused_if_orphaned(tmp_path, monkeypatch):
    path = _write(tmp_path / "rel")
    monkeypatch.setattr(writer, "exchange", lambda a, b: False)
    _write(tmp_path / "rel", n=99, overwrite=True)
    assert open_release(path).n == 99 and _leftovers(tmp_path) == []

    renames = []
    real = os.rename

    def rename(a, b):  # killed between the two renames
        renames.append(a)
        if len(renames) > 1:
            raise Killed
        real(a, b)

    with monkeypatch.context() as mp:
        mp.setattr(writer.os, "rename", rename)
        with pytest.raises(Killed):
            _write(tmp_path / "rel", n=5, overwrite=True)
    assert not path.exists()
    (old,) = [p for p in tmp_path.iterdir() if p.name.endswith(".old")]
    with pytest.raises(ReleaseError, match=f"{old.name}.*move it back"):
        _write(tmp_path / "rel", n=5, overwrite=True)
    assert open_release(old).n == 99
    old.rename(path)
    _write(tmp_path / "rel", n=5, overwrite=True)
    assert open_release(path).n == 5 and _leftovers(tmp_path) == []


def test_stale_staging_is_swept_at_the_next_write(tmp_path):
    stale = tmp_path / ".rel.0123abcd.tmp"
    (stale / "data").mkdir(parents=True)
    (stale / "manifest.json").write_text("{}")
    (tmp_path / ".rel.0123abcd.old").write_text("replaced")  # the target exists below: obsolete
    keep = [tmp_path / ".rel.v2.0123abcd.tmp", tmp_path / ".rel.notours.tmp"]
    for k in keep:
        k.mkdir()
    _write(tmp_path / "rel.v2.0123abcd")  # a target whose name extends ours
    (tmp_path / "rel").mkdir()
    _write(tmp_path / "rel", overwrite=True)
    assert _leftovers(tmp_path) == sorted(k.name for k in keep)


@linux_only
def test_every_file_and_folder_is_fsynced_before_the_rename(tmp_path, monkeypatch):
    synced, renamed = [], []
    real_fsync, real_rename = os.fsync, os.rename
    monkeypatch.setattr(files.os, "fsync", lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}")) or
                        real_fsync(fd))
    monkeypatch.setattr(writer.os, "rename", lambda a, b: renamed.append(len(synced)) or real_rename(a, b))
    post = {"theta": np.zeros((1, 5, 2))}
    path = _write(tmp_path / "rel", posterior=post)
    (stage,) = {Path(p).parent for p in synced if p.endswith("manifest.json")}
    written = {str(stage / p.relative_to(path)) for p in path.rglob("*")} | {str(stage)}
    assert written <= set(synced[:renamed[0]]), written - set(synced)
    assert synced[-1] == str(tmp_path)  # and the folder holding the release, after the rename
    zpath = _write(tmp_path / "z", zip=True)
    assert str(tmp_path / zpath.name) not in synced and any(p.endswith(".tmp") and "/.z.zip." in p for p in synced)


@pytest.mark.parametrize("where", ["parquet", "posterior"])
def test_a_full_disk_is_a_release_error_and_leaves_nothing(tmp_path, monkeypatch, where):
    full = OSError(errno.ENOSPC, "No space left on device")
    if where == "parquet":  # the second dataset's file fills the disk half-way
        real = writer._HashingFile.__init__
        files = []

        def opened(self, f):
            real(self, f)
            files.append(f)
            if len(files) == 2:
                self._f = type("Full", (), {"write": lambda _, b: (f.write(b[:4]), (_ for _ in ()).throw(full)),
                                            "flush": f.flush, "close": f.close, "closed": property(lambda _: f.closed)})()

        monkeypatch.setattr(writer._HashingFile, "__init__", opened)
    else:
        real = Path.write_bytes
        monkeypatch.setattr(Path, "write_bytes", lambda self, data: real(self, data[:10]) and (_ for _ in ()).throw(full))
    post = {"theta": np.zeros((1, 5, 2))}
    with pytest.raises(ReleaseError, match="no space left"):
        _write(tmp_path / "rel", posterior=post)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    path = _write(tmp_path / "rel")
    monkeypatch.setattr(writer, "_netcdf_bytes", lambda idata: (_ for _ in ()).throw(full))
    with pytest.raises(ReleaseError, match="existing release is unchanged"):
        _write(tmp_path / "rel", n=99, posterior=post, overwrite=True)
    assert open_release(path).n == 40 and _leftovers(tmp_path) == []


_FULL_DISK = """
import resource, signal, sys
import numpy as np
from synthinfer.errors import ReleaseError
from synthinfer.privacy import PrivacyLedger
from synthinfer.release import ReleaseRecord, write_release
import pandas as pd, arviz, xarray, h5netcdf  # imported before the limit

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
post = {"theta": np.random.default_rng(0).normal(size=(2, 500, 100))}  # 800 kB, incompressible
record = ReleaseRecord(mechanism="test", settings={}, ledger=PrivacyLedger((1.0, 0.0)), n=10, seed_fixed=False,
                       posterior=post)
data = [pd.DataFrame({"a": np.arange(10)})]
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, resource.RLIM_INFINITY))  # files past 200 kB: "disk full"
try:
    write_release(sys.argv[1], data, record=record, skip_private_data_check=True)
except ReleaseError as e:
    print("error:", e)
    sys.exit(3)
"""


@linux_only
def test_a_real_full_disk_while_writing_the_posterior_does_not_crash(tmp_path):
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(_FULL_DISK), str(tmp_path / "rel")],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=300)
    assert res.returncode == 3, (res.returncode, res.stderr[-2000:])  # SIGSEGV would be -11
    assert "no space left" in res.stdout and "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []


_HOLD = """
import sys
from synthinfer.files import output_lock
with output_lock(sys.argv[1]):
    print("locked", flush=True)
    sys.stdin.readline()
"""


@pytest.fixture()
def held_by_another_process():
    """Hold the output lock of a path in a child process until the test ends."""
    procs = []

    def hold(path: Path) -> None:
        proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(path)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": SRC})
        procs.append(proc)
        assert proc.stdout.readline().strip() == "locked"

    yield hold
    for proc in procs:
        proc.communicate("\n", timeout=60)
        assert proc.returncode == 0


def test_a_second_writer_to_the_same_path_fails_at_once_and_spends_nothing(toy_files, monkeypatch,
                                                                           held_by_another_process):
    from synthinfer.generate import PrivBayes

    out = toy_files / "rel"
    held_by_another_process(out)
    monkeypatch.setattr(PrivBayes, "fit", lambda *a, **k: pytest.fail("spent budget while another run holds --out"))
    res = CliRunner().invoke(app, ["generate", str(toy_files / "toy.csv"), "--domain", str(toy_files / "domain.json"),
                                   "--generator", "privbayes", "--epsilon", "0.5", "--out", str(out)])
    assert res.exit_code == 2 and res.output.count("error:") == 1 and "another process" in res.output, res.output
    assert "Traceback" not in res.output and not out.exists()
    with pytest.raises(ReleaseError, match="being written by another process"):
        _write(out)
    _write(toy_files / "elsewhere")  # another path is free


def test_the_lock_is_reentrant_in_its_thread_and_removed_after(tmp_path):
    target = tmp_path / "rel"
    with files.output_lock(target):
        path = _write(target)  # write_release takes the lock the command line holds
        errors = []
        t = threading.Thread(target=lambda: errors.append(pytest.raises(ReleaseError, _write, tmp_path / "rel",
                                                                        overwrite=True)))
        t.start()
        t.join()
        assert errors and "another thread" in str(errors[0].value)
    assert open_release(path).n == 40 and _leftovers(tmp_path) == []
    with files.output_lock(target):  # free again
        pass
