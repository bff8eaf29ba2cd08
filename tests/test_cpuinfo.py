"""The one reader of /proc/cpuinfo: the first processor's model name and instruction sets, or nothing."""

import pytest

from aitune import cpuinfo

X86 = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse4_2 avx2 amx_bf16 amx_int8

processor\t: 1
model name\t: a second processor, never read
flags\t\t: fpu
"""

ARM = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd bf16 i8mm
CPU implementer\t: 0x41
"""


@pytest.fixture
def cpuinfo_file(tmp_path, monkeypatch):
    def written(text):
        path = tmp_path / "cpuinfo"
        path.write_text(text, encoding="ascii")
        monkeypatch.setattr(cpuinfo, "CPUINFO", path)
        cpuinfo.first_processor.cache_clear()
        return path

    yield written
    cpuinfo.first_processor.cache_clear()


def test_an_x86_machine_gives_its_model_and_its_first_processors_flags(cpuinfo_file):
    cpuinfo_file(X86)

    assert cpuinfo.cpu_model() == "Intel(R) Xeon(R) Platinum 8480+"
    assert cpuinfo.cpu_flags() == {"fpu", "sse4_2", "avx2", "amx_bf16", "amx_int8"}


def test_an_arm_machine_gives_its_features_and_no_model_name(cpuinfo_file):
    cpuinfo_file(ARM)

    assert cpuinfo.cpu_flags() == {"fp", "asimd", "bf16", "i8mm"}
    assert cpuinfo.cpu_model() == ""


def test_a_machine_without_the_file_has_no_flags_and_no_model(cpuinfo_file, tmp_path):
    cpuinfo_file("").unlink()

    assert cpuinfo.cpu_flags() == frozenset() and cpuinfo.cpu_model() == ""
