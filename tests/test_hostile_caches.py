"""Per-user caches as a stranger or a failing disk leaves them (tests/hostile/caches/, made by make_cache_corpus.py).

A cache file is read as any untrusted file (`aitune.report.cache`): one with NaN, Infinity, a figure out
of range or the wrong shape, a link, another user's file or one others may write is ignored with one
sentence, the figures are measured again and the file rewritten; a cache folder that is a link, another
user's, open to others, or that cannot be made is never followed, re-permissioned or written into, and
the figures are measured without caching, said once. Capture and tune go on in every case.
"""

from __future__ import annotations

import json
import logging
import os
import stat

import pytest
from cli_helpers import APPS, capture_busy_app, run_cli
from hostile.make_cache_corpus import CACHES, GAIN_CASES, GOOD_PEAKS, PEAKS_CASES, corpus

from aitune.report.io import load
from aitune.report.model import json_form

torch = pytest.importorskip("torch")

from aitune.suggest.gain import Calibration  # noqa: E402
from aitune.torch import calibration, peaks  # noqa: E402
from aitune.torch.tuning import calibrate  # noqa: E402

MEASURED_PEAKS = {"gemm_flops_per_s": {"float32": 3.0e11}, "copy_bytes_per_s": 4.0e10, "source": "measured here"}
MEASURED_GAIN = Calibration(5.0, 0.5, 20.0, {"conv": 1.4, "matmul": 1.1}, "calibrated here")
NOBODY = 65534


@pytest.fixture(autouse=True)
def cache_root(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("AITUNE_CACHE_DIR", str(root))
    return root


@pytest.fixture
def measured(monkeypatch):
    """Measurements that count themselves instead of timing anything, on a quiet machine: the backends'
    names for the peaks, ``gain`` for the calibration."""
    runs: list[str] = []
    monkeypatch.setattr(peaks, "backends", lambda: ["cpu"])
    monkeypatch.setattr(peaks, "measure_peaks", lambda backend: runs.append(backend) or MEASURED_PEAKS)
    monkeypatch.setattr(calibration, "_loaded", lambda: False)
    monkeypatch.setattr(calibrate, "calibrate", lambda device: runs.append("gain") or MEASURED_GAIN)
    return runs


def _sentences(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "aitune.report.cache"]


def _planted(path, data: bytes):
    """``data`` at the cache file ``path``, in a private folder, as aitune would have written it."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def _give_away(path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    os.lchown(path, NOBODY, NOBODY)


def test_the_committed_cache_corpus_is_what_the_script_makes():
    made = corpus()
    assert {path.name: path.read_bytes() for path in CACHES.iterdir()} == made


@pytest.mark.parametrize("case", sorted(PEAKS_CASES))
def test_a_hostile_peaks_file_is_ignored_with_one_sentence_measured_again_and_rewritten(case, measured, caplog):
    path = _planted(peaks.peaks_file("cpu"), (CACHES / f"peaks-{case}.json").read_bytes())

    with caplog.at_level(logging.WARNING):
        first, second = peaks.ensure_peaks(), peaks.ensure_peaks()

    assert first == second == {"cpu": MEASURED_PEAKS}
    assert measured == ["cpu"]  # measured once, then read from the rewritten cache
    [sentence] = _sentences(caplog)
    assert sentence.startswith(f"aitune: the cache file {path} is ignored: ")
    assert sentence.endswith("; it is measured again and rewritten.") and sentence.count("\n") == 0
    assert json.loads(path.read_bytes()) == MEASURED_PEAKS
    assert stat.S_IMODE(path.stat().st_mode) & 0o022 == 0


@pytest.mark.parametrize("case", sorted(GAIN_CASES))
def test_a_hostile_calibration_file_is_ignored_with_one_sentence_measured_again_and_rewritten(case, measured, caplog):
    path = _planted(calibration.cache_file(), (CACHES / f"gain-{case}.json").read_bytes())

    with caplog.at_level(logging.WARNING):
        first = calibration.ensure_calibration(calibrate.calibrate)
        second = calibration.ensure_calibration(calibrate.calibrate)

    assert first == second == MEASURED_GAIN
    assert measured == ["gain"]
    assert len(_sentences(caplog)) == 1 and f"the cache file {path} is ignored" in _sentences(caplog)[0]
    assert Calibration.from_dict(json.loads(path.read_bytes())) == MEASURED_GAIN


def test_a_good_cache_is_read_without_a_word(measured, caplog):
    _planted(peaks.peaks_file("cpu"), json.dumps(GOOD_PEAKS).encode())

    with caplog.at_level(logging.WARNING):
        assert peaks.ensure_peaks() == {"cpu": GOOD_PEAKS}

    assert measured == [] and _sentences(caplog) == []


def _link_to_a_good_file(path, elsewhere):
    (elsewhere / "peaks.json").write_text(json.dumps(GOOD_PEAKS))
    path.symlink_to(elsewhere / "peaks.json")
    return "it is a symbolic link"


def _open_to_others(path, elsewhere):
    path.write_text(json.dumps(GOOD_PEAKS))
    path.chmod(0o666)
    return "group or others may write to it (mode 666)"


def _anothers(path, elsewhere):
    path.write_text(json.dumps(GOOD_PEAKS))
    _give_away(path)
    return f"it belongs to user id {NOBODY}"


def _fifo(path, elsewhere):
    os.mkfifo(path, 0o600)
    return "it is not a regular file"


def _link_to_dev_zero(path, elsewhere):
    path.symlink_to("/dev/zero")
    return "it is a symbolic link"


@pytest.mark.parametrize("plant", [_link_to_a_good_file, _open_to_others, _anothers, _fifo, _link_to_dev_zero])
def test_a_peaks_file_that_is_a_link_anothers_or_open_to_others_is_never_read(plant, measured, caplog, tmp_path):
    path = peaks.peaks_file("cpu")
    path.parent.mkdir(mode=0o700, parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    reason = plant(path, elsewhere)

    with caplog.at_level(logging.WARNING):
        assert peaks.ensure_peaks() == {"cpu": MEASURED_PEAKS}

    assert measured == ["cpu"]
    assert _sentences(caplog) == [
        f"aitune: the cache file {path} is ignored: {reason}; it is measured again and rewritten."
    ]
    assert not path.is_symlink() and json.loads(path.read_bytes()) == MEASURED_PEAKS  # replaced, never written through
    assert [json.loads(p.read_text()) for p in elsewhere.iterdir()] in ([], [GOOD_PEAKS])


def _linked_folder(folder, elsewhere):
    _planted(elsewhere / peaks.peaks_file("cpu").name, json.dumps(GOOD_PEAKS).encode())
    elsewhere.chmod(0o755)
    folder.parent.mkdir(parents=True)
    folder.symlink_to(elsewhere, target_is_directory=True)
    return "it is a symbolic link"


def _folder_open_to_others(folder, elsewhere):
    folder.mkdir(parents=True)
    folder.chmod(0o777)
    return "group or others may write to it (mode 777)"


def _anothers_folder(folder, elsewhere):
    folder.mkdir(parents=True)
    _give_away(folder)
    return f"it belongs to user id {NOBODY}"


def _file_for_the_folder(folder, elsewhere):
    folder.parent.mkdir(parents=True)
    folder.write_text("not a folder")
    return "it is not a folder"


def _file_for_the_cache_root(folder, elsewhere):
    folder.parent.write_text("not a folder")
    return "it could not be created (Not a directory)"


FOLDER_CASES = [
    _linked_folder,
    _folder_open_to_others,
    _anothers_folder,
    _file_for_the_folder,
    _file_for_the_cache_root,
]


@pytest.mark.parametrize("plant", FOLDER_CASES)
def test_an_unusable_cache_folder_is_never_followed_or_written_and_said_once(plant, measured, caplog, tmp_path):
    folder = calibration.cache_dir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    reason = plant(folder, elsewhere)
    before = {path.name: (path.read_bytes(), path.stat().st_mode) for path in elsewhere.iterdir()}
    modes = {path: os.lstat(path).st_mode for path in (folder, elsewhere) if os.path.lexists(path)}

    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            assert peaks.ensure_peaks() == {"cpu": MEASURED_PEAKS}
            assert calibration.ensure_calibration(calibrate.calibrate) == MEASURED_GAIN

    assert measured == ["cpu", "gain"] * 2  # measured each time: nothing cached, nothing read
    assert _sentences(caplog) == [
        f"aitune: the cache folder {folder} is not used: {reason}; figures are measured without caching."
    ]
    assert {path.name: (path.read_bytes(), path.stat().st_mode) for path in elsewhere.iterdir()} == before
    assert {path: os.lstat(path).st_mode for path in modes} == modes  # nothing chmod-ed


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_cache_folder_is_measured_without_caching_and_said_once(measured, caplog):
    folder = calibration.cache_dir()
    folder.mkdir(parents=True, mode=0o500)

    with caplog.at_level(logging.WARNING):
        assert peaks.ensure_peaks() == {"cpu": MEASURED_PEAKS}
        assert calibration.ensure_calibration(calibrate.calibrate) == MEASURED_GAIN

    assert _sentences(caplog) == [
        f"aitune: the cache folder {folder} is not used: a file cannot be written in it (Permission denied); "
        "figures are measured without caching."
    ]
    assert list(folder.iterdir()) == []


def test_a_capture_with_a_nan_peaks_cache_writes_its_profile_and_rebuilds_the_cache(tmp_path):
    path = _planted(peaks.peaks_file("cpu"), (CACHES / "peaks-copy-nan.json").read_bytes())

    profile = load(capture_busy_app(tmp_path / "out"))  # the subprocess reads the same $AITUNE_CACHE_DIR

    roofs = json_form(profile)["environment"]["machine_peaks"]["cpu"]
    assert peaks.checked_peaks(json.loads(path.read_bytes())) == roofs  # the cache holds what was measured


def test_tune_with_a_file_where_the_cache_folder_should_be_tunes_without_caching_and_says_so_once(tmp_path, cache_root):
    cache_root.mkdir()
    (cache_root / "calibration").write_text("not a folder")
    options = ["--input", "x", "--warmup", "1", "--runs", "2", "--record", "1", "--strategy", "first-wins"]

    result = run_cli(
        "tune",
        f"{APPS / 'loop_app.py'}:infer",
        *options,
        *("--no-verify", "--targets", "encoder", "--backends", "onnxruntime", "--out", str(tmp_path / "out")),
    )

    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    folder = cache_root / "calibration"
    assert result.stderr.count(f"the cache folder {folder} is not used: it is not a folder;") == 1
    assert (cache_root / "calibration").read_text() == "not a folder"
    assert (tmp_path / "out" / "plan.json").is_file()
