"""Write the hostile rank-folder corpus under ``ranks/`` next to this script: what a stranger's ``merge`` folder
and attachments can hold to hurt whoever opens them.

Run ``python tests/hostile/make_rank_corpus.py`` from the repository root to regenerate it. Every case is
a folder ``ranks/<case>/`` that ``aitune-profile merge`` (or ``report``, for a single file) is pointed at;
files that git cannot hold (a FIFO, a link to ``/dev/zero``) are planted at test time by `plant`.
The size attacks are gzipped, so the corpus stays a few hundred kilobytes.
"""

from __future__ import annotations

import copy
import os
import sys
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent)]

from builders import decoder_trace  # noqa: E402
from ranks import as_ranks, merged  # noqa: E402

from aitune.report import build_profile, dumps  # noqa: E402

RANKS = HERE / "ranks"
HUGE = 10**12


def _gzipped_stream(head: bytes, chunk: bytes, repeat: int, tail: bytes) -> bytes:
    """``head + chunk * repeat + tail`` gzipped, without ever holding the unpacked bytes."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [packer.compress(head)]
    block = chunk * (2**20 // len(chunk))
    whole, rest = divmod(repeat * len(chunk), len(block))
    parts += [packer.compress(block) for _ in range(whole)]
    parts += [packer.compress(chunk * (rest // len(chunk))), packer.compress(tail), packer.flush()]
    return b"".join(parts)


def rank_docs() -> list[dict]:
    """Two well-formed rank documents of one run, torch-free (from the hand-built decoder trace)."""
    profile = build_profile(decoder_trace())
    return as_ranks([profile, copy.deepcopy(profile)])


def corpus() -> dict[str, bytes]:
    """Path under ``ranks/`` → bytes of every committed case."""
    first, second = rank_docs()
    files: dict[str, bytes] = {}

    def folder(case: str, *docs: dict) -> None:
        for doc in docs:
            files[f"{case}/rank{doc['distributed']['rank']}/profile.json"] = dumps(doc)

    huge = [copy.deepcopy(doc) for doc in (first, second)]
    for doc in huge:
        doc["distributed"]["world_size"] = HUGE
    folder("world-size-huge", *huge)

    outside = copy.deepcopy(second)
    outside["distributed"]["rank"] = 7
    folder("rank-outside-the-world", first, second, outside)

    folder("rank-in-the-wrong-folder", first, {**second, "distributed": {**second["distributed"], "rank": 0}})
    files["rank-in-the-wrong-folder/rank1/profile.json"] = files.pop("rank-in-the-wrong-folder/rank0/profile.json")
    files["rank-in-the-wrong-folder/rank0/profile.json"] = dumps(first)

    folder("padded-rank-folder", first)
    files["padded-rank-folder/rank01/profile.json"] = dumps(second)

    # A rank's profile that is a gzip bomb: 198 KB unpacking to a 10⁸-element array in an unknown key.
    folder("gzip-bomb-rank", first)
    head = dumps(second)[:-2] + b', "padding": ['
    files["gzip-bomb-rank/rank1/profile.json"] = _gzipped_stream(head, b"0,", 10**8, b"0]}\n")

    # A merged document whose ranks block states a world far larger than the ranks it lists.
    lie = merged([first, second])
    lie["ranks"]["world_size"] = HUGE
    files["merged-world-size-lie/profile.json"] = dumps(lie)
    lie = merged([first, second])
    lie["ranks"]["step_ranks"] = [HUGE] * len(lie["ranks"]["step_ranks"])
    files["merged-step-rank-outside/profile.json"] = dumps(lie)

    # A trace of 10⁷ tiny events, gzipped to a few megabytes.
    files["trace-of-ten-million-events/trace.json.gz"] = _gzipped_stream(
        b'{"traceEvents": [', b'{"ph": "X", "ts": 1},', 10**7, b'{"ph": "X", "ts": 1}]}'
    )
    return files


def plant(root: Path) -> dict[str, Path]:
    """The cases git cannot hold, made under ``root``: case name → the folder to merge."""
    first = rank_docs()[0]
    cases = {}
    for case in ("fifo-rank", "dev-zero-rank", "dev-urandom-rank"):
        cases[case] = root / case
        for rank in (0, 1):
            (root / case / f"rank{rank}").mkdir(parents=True)
        (root / case / "rank0" / "profile.json").write_bytes(dumps(first))
    os.mkfifo(root / "fifo-rank" / "rank1" / "profile.json")
    (root / "dev-zero-rank" / "rank1" / "profile.json").symlink_to("/dev/zero")
    (root / "dev-urandom-rank" / "rank1" / "profile.json").symlink_to("/dev/urandom")
    return cases


def main() -> None:
    for name, data in corpus().items():
        path = RANKS / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


if __name__ == "__main__":
    main()
