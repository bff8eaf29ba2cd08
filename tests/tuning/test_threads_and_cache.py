"""Backends run on torch's threads, and Inductor's generated code goes to a private folder only while aitune builds."""

from __future__ import annotations

import os
import stat

import pytest
import torch

import aitune.torch as ait
from aitune.torch.backends.inductor_cache import ENV, cache_home, inductor_cache, private_cache_dir

from .conftest import tiny_mlp
from .test_backends import context


@pytest.fixture
def torch_threads_restored():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("threads", [1, 2])
def test_onnxruntime_sessions_get_torchs_thread_count(threads, torch_threads_restored):
    torch.set_num_threads(threads)
    backend = ait.OnnxRuntimeBackend()

    built = backend.build(context(tiny_mlp(), torch.randn(2, 8)))

    # Read back from the session's own options, not from what aitune meant to set.
    assert (built.details["intra_op_threads"], built.details["inter_op_threads"]) == (threads, 1)
    assert backend.config() == {"intra_op_threads": threads}


def test_a_plan_written_before_the_thread_budget_never_means_all_cores(torch_threads_restored):
    torch.set_num_threads(1)

    old = ait.OnnxRuntimeBackend(intra_op_threads=0)

    assert old.config() == {"intra_op_threads": 1}


def test_the_cache_follows_xdg_cache_home_only_when_absolute(tmp_path):
    assert cache_home({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "aitune" / "inductor"
    assert cache_home({"XDG_CACHE_HOME": "relative"}).parts[-3:] == (".cache", "aitune", "inductor")


def test_the_cache_folder_is_created_private(tmp_path):
    home = tmp_path / "cache" / "aitune" / "inductor"

    folder, refused = private_cache_dir(home)

    assert (folder, refused) == (home, None)
    assert stat.S_IMODE(os.stat(home).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(home.parent).st_mode) == 0o700


def test_a_cache_folder_open_to_others_or_a_link_is_not_used(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    shared.chmod(0o777)
    link = tmp_path / "link"
    link.symlink_to(shared)

    for planted, why in ((shared, "group or others may write to it (mode 777)"), (link, "it is a symbolic link")):
        folder, refused = private_cache_dir(planted)

        assert refused == f"{planted} is not used: {why}"
        assert folder not in (shared, link) and folder.is_dir()
        assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="giving a folder away needs root")
def test_a_cache_folder_owned_by_another_user_is_not_used(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 12345, 12345)

    folder, refused = private_cache_dir(theirs)

    assert refused == f"{theirs} is not used: it belongs to user id 12345"
    assert folder != theirs


@pytest.mark.parametrize("before", [None, "/somewhere/the/user/chose"])
def test_the_cache_variable_is_restored_exactly_even_when_the_build_fails(before, monkeypatch, tmp_path):
    if before is None:
        monkeypatch.delenv(ENV, raising=False)
    else:
        monkeypatch.setenv(ENV, before)

    with pytest.raises(RuntimeError), inductor_cache(tmp_path):
        assert os.environ[ENV] == str(tmp_path)
        raise RuntimeError("build failed")

    assert os.environ.get(ENV) == before


@pytest.mark.slow
def test_inductor_writes_its_code_to_the_private_folder_and_leaves_the_environment_as_it_was(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(ENV, raising=False)  # importing torch._dynamo set it to the default: unset is the harder case
    torch._dynamo.reset()  # code compiled by earlier tests would be reused from memory

    built = ait.InductorBackend().build(context(tiny_mlp(), torch.randn(2, 8)))

    written = list((tmp_path / "aitune" / "inductor").rglob("*.py"))
    assert written and built.details["threads"] == torch.get_num_threads()
    assert ENV not in os.environ
