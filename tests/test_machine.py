"""The CPU's instruction sets, read from /proc/cpuinfo's text (given here, so that no test
depends on the machine it runs on)."""

from aft_export.machine import cpu_features

EPYC = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu vme sse sse2 avx avx2 fma bmi2

processor\t: 1
model name\t: AMD EPYC 7B13
flags\t\t: fpu vme sse sse2 avx avx2 fma bmi2 avx512f avx512_vnni
"""
SAPPHIRE = ("model name : Intel Xeon Platinum 8480+\n"
            "flags : avx2 avx512f avx512_vnni avx_vnni amx_bf16 amx_tile amx_int8\n")
# Zen 4 and newer: AVX512_BF16 without AMX
ZEN4 = "model name : AMD EPYC 9654\nflags : avx2 avx512f avx512_vnni avx512_bf16\n"
ALDER = "model name : 12th Gen Intel Core i7\nflags : avx2 avx_vnni\n"
GRAVITON = "processor : 0\nBogoMIPS : 243.75\nFeatures : fp asimd evtstrm aes sha1 sha2 crc32 atomics asimddp\n"


def test_the_first_processor_says_it_for_all():
    cpu = cpu_features(EPYC, "x86_64")
    assert (cpu.vnni, cpu.avx512, cpu.amx, cpu.avx2) == (False, False, False, True)
    assert cpu.model == "AMD EPYC 7B13" and cpu.x86
    assert cpu.describe() == "x86_64 (AVX2; no AVX-512, VNNI, BF16, AMX)"
    assert cpu.to_dict() == {"arch": "x86_64", "model": "AMD EPYC 7B13", "vnni": False, "avx512": False,
                             "amx": False, "avx2": True, "bf16": False}  # fmt: skip


def test_vnni_in_any_of_its_forms():
    server, laptop = cpu_features(SAPPHIRE, "x86_64"), cpu_features(ALDER, "AMD64")
    assert (server.vnni, server.avx512, server.amx, server.avx2) == (True, True, True, True)
    assert server.describe() == "x86_64 (AVX2, AVX-512, VNNI, BF16, AMX)"
    assert (laptop.vnni, laptop.avx512, laptop.amx, laptop.x86) == (True, False, False, True)


def test_not_x86_has_none_of_them_and_unreadable_flags_are_unknown():
    arm = cpu_features(GRAVITON, "aarch64")
    assert (arm.vnni, arm.avx512, arm.amx, arm.avx2, arm.x86) == (False, False, False, False, False)
    assert arm.describe() == "aarch64 (not x86)"
    unknown = cpu_features("", "x86_64")  # macOS, Windows: no /proc/cpuinfo
    assert (unknown.vnni, unknown.avx512, unknown.amx, unknown.avx2) == (None, None, None, None)
    assert unknown.bf16 is None
    assert unknown.describe() == "x86_64 (AVX2, AVX-512, VNNI, BF16, AMX unknown)"


def test_bf16_units_are_avx512_bf16_or_amx_bf16():
    zen4, server, laptop = (cpu_features(t, "x86_64") for t in (ZEN4, SAPPHIRE, ALDER))
    assert (zen4.bf16, zen4.amx, server.bf16, laptop.bf16) == (True, False, True, False)
    assert zen4.describe() == "x86_64 (AVX2, AVX-512, VNNI, BF16; no AMX)"
    amx_only = cpu_features("flags : avx2 avx512f amx_tile amx_bf16\n", "x86_64")  # AMX's bf16 tiles count alone
    assert amx_only.bf16 and not cpu_features(GRAVITON, "aarch64").bf16


def test_this_machine_gives_an_answer():
    cpu = cpu_features()
    import platform

    assert cpu.arch == platform.machine().lower() and cpu.describe().startswith(f"{cpu.arch} (")
