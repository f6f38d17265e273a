"""What this machine's CPU can do: the instruction sets that decide which int8 kernels run.

One function, :func:`cpu_features`, read from ``/proc/cpuinfo``'s ``flags`` (Linux). What it
reports matters because runtimes pick their int8 kernels by it: without VNNI, x86 int8 dot
products (``vpmaddubsw``) add pairs of u8 x s8 products in saturating 16 bits, which
OpenVINO's CPU plugin does with full-range weights (:mod:`aft_export.runners.openvino`);
AVX-512 and AMX change what is fastest, and bf16 units (AVX512_BF16, AMX-BF16) are what the
``openvino-bf16`` runtime computes on (:mod:`aft_export.runtimes`). Where the flags cannot be read (another OS), the x86
sets are ``None``: unknown, never guessed. On a CPU that is not x86 they are ``False``: these
are x86 instruction sets.
"""

from __future__ import annotations

import platform
from dataclasses import asdict, dataclass
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
X86 = ("x86_64", "amd64", "i386", "i686", "x86")
# /proc/cpuinfo flags: any one of them means the CPU has the set
VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")  # int8 dot products in 32-bit sums (AVX-512, AVX, AMX)
AVX512_FLAGS = ("avx512f",)
AMX_FLAGS = ("amx_tile", "amx_int8")
AVX2_FLAGS = ("avx2",)
# bf16 units: AVX-512's bf16 dot products (Zen 4 and newer, Cooper Lake, Sapphire Rapids and newer) or AMX's
# bf16 tiles (Sapphire Rapids and newer); OpenVINO's CPU plugin computes in bf16 on either
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


@dataclass(frozen=True)
class CpuFeatures:
    """This CPU: its architecture and model name, and whether it has VNNI, AVX-512 (F), AMX,
    AVX2 and bf16 units (None: unknown, where the flags cannot be read)."""

    arch: str  # platform.machine(), lower case: x86_64, aarch64, arm64, ...
    model: str  # /proc/cpuinfo's model name, else platform.processor(); "" when neither says
    vnni: bool | None
    avx512: bool | None
    amx: bool | None
    avx2: bool | None
    bf16: bool | None  # AVX512_BF16 or AMX-BF16 (BF16_FLAGS)

    @property
    def x86(self) -> bool:
        return self.arch in X86

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        """One phrase: ``x86_64 (AVX2, AVX-512, VNNI, BF16; no AMX)``; unknown sets are said as such."""
        if not self.x86:
            return f"{self.arch} (not x86)"
        sets = (("AVX2", self.avx2), ("AVX-512", self.avx512), ("VNNI", self.vnni), ("BF16", self.bf16),
                ("AMX", self.amx))
        has = [n for n, v in sets if v]
        lacks = [n for n, v in sets if v is False]
        unknown = [n for n, v in sets if v is None]
        parts = [", ".join(has) if has else ""] + ([f"no {', '.join(lacks)}"] if lacks else [])
        parts += [f"{', '.join(unknown)} unknown"] if unknown else []
        return f"{self.arch} ({'; '.join(p for p in parts if p)})"


def cpu_features(cpuinfo: str | None = None, arch: str | None = None) -> CpuFeatures:
    """This CPU's instruction sets, from ``/proc/cpuinfo`` (``cpuinfo``: its text, and ``arch``:
    platform.machine(), given instead of read, for tests and other machines' records)."""
    arch = (arch if arch is not None else platform.machine()).lower()
    if cpuinfo is None:
        try:
            cpuinfo = CPUINFO.read_text(errors="replace")
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():  # the first processor's block says it for all
        key, sep, value = line.partition(":")
        if not sep:
            if fields:
                break
            continue
        fields.setdefault(key.strip().lower(), value.strip())
    model = fields.get("model name") or platform.processor() or ""
    if arch not in X86:
        return CpuFeatures(arch, model, False, False, False, False, False)
    if "flags" not in fields:  # not Linux, or a /proc without flags: unknown, not absent
        return CpuFeatures(arch, model, None, None, None, None, None)
    flags = set(fields["flags"].split())

    def has(names) -> bool:
        return any(n in flags for n in names)

    return CpuFeatures(arch, model, has(VNNI_FLAGS), has(AVX512_FLAGS), has(AMX_FLAGS), has(AVX2_FLAGS),
                       has(BF16_FLAGS))
