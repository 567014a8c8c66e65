"""discover.Rediscovery: watch walks the folders again only when one of them changed."""

from __future__ import annotations

import os

from nccl_doctor.discover import Rediscovery, discover


def _age(path, seconds: float = 100.0) -> None:
    """Set a folder's mtime in the past, as if nothing had happened to it for a while."""
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - int(seconds * 1e9)))


def test_walks_again_only_when_a_folder_changed(tmp_path):
    (tmp_path / "rank-0.log").write_text("a\n")
    (tmp_path / "sub").mkdir()
    _age(tmp_path / "sub")
    _age(tmp_path)
    found = Rediscovery([str(tmp_path)])
    first = found()
    assert [f.path for f in first[0]] == [str(tmp_path / "rank-0.log")]
    assert found() is first  # nothing changed: no walk
    with open(tmp_path / "rank-0.log", "a") as fh:
        fh.write("b\n")  # a file that grows does not change its folder
    assert found() is first
    (tmp_path / "sub" / "rank-1.log").write_text("c\n")  # a new file in a sub-folder that was empty
    again = found()
    assert again is not first and again == discover([str(tmp_path)])
    _age(tmp_path / "sub")  # an mtime that changed is a change (walked once more), then quiet again
    settled = found()
    assert found() is settled
    (tmp_path / "rank-0.log").unlink()
    assert [f.path for f in found()[0]] == [str(tmp_path / "sub" / "rank-1.log")]


def test_recently_changed_folders_globs_and_stdin_are_walked_every_time(tmp_path):
    (tmp_path / "a.log").write_text("a\n")
    fresh = Rediscovery([str(tmp_path)])  # the folder changed just now: its mtime may hide more
    assert fresh() is not fresh()
    _age(tmp_path)
    globbed = Rediscovery([str(tmp_path / "*.log")])
    assert not globbed.cacheable and globbed() is not globbed()
    assert not Rediscovery(["-"]).cacheable
    missing = Rediscovery([str(tmp_path / "later")])  # not created yet: looked for at every poll
    assert missing()[1] and missing() is not missing()
