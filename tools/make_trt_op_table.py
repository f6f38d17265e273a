"""Build aft_export/trtcheck/ops.json: the ONNX operator table of each TensorRT version we target.

The table is what onnx-tensorrt's ``docs/operators.md`` says (columns Operator |
Supported | Supported Types | Restrictions, plus the opset range in its header), for
TensorRT 8.5 (JetPack 5.1), 8.6 (JetPack 6.0), 10.3 (JetPack 6.1/6.2), 10.13 and 11.4.
Only some of those versions have their own operators.md available to us; the others
are derived from the nearest one with the documented changes applied. Every version's
entry in the output says exactly which file it came from and how it was derived, and
every derivation step quotes the onnx-tensorrt Changelog (or NVIDIA release note) line
it rests on; the script refuses to run if a quoted Changelog line is not in the
Changelog file it is given.

The operators.md table is a *documentation* claim. The importer code is what actually
decides (see the rules memo); this table is the first, coarse filter of a checker.

Inputs (pass each with --operators KEY=PATH; --changelog PATH):

  8.5-GA    onnx-tensorrt branch 8.5-GA (head fdeeaca, "TensorRT 8.5.3"; its importer
            sources equal the 8.5.2.2 commit df60e73 that JetPack 5.1's 8.5.2 ships):
              git -C <onnx-tensorrt clone> show 8.5-GA:docs/operators.md
              https://github.com/onnx/onnx-tensorrt/blob/release/8.5-GA/docs/operators.md
  8.6-GA    branch 8.6-GA (head ee0b139; docs/operators.md unchanged since 6ba67d3
            "TensorRT 8.6.1 Parser Update"):
              git -C <clone> show 8.6-GA:docs/operators.md
  10.1-GA   branch/tag release/10.1-GA (96e7811), the newest 10.x branch in our mirror and
            the base for 10.3 (its header still reads "TensorRT 10.0"):
              git -C <clone> show 10.1-GA:docs/operators.md
  10.15     docs/operators.md at the TensorRT 10.15 GA parser release (header "TensorRT
            10.15 ... opset 9 to opset 24"); base for 10.13 and 11.4:
              https://github.com/onnx/onnx-tensorrt/blob/release/10.15-GA/docs/operators.md
            (in this project's code index: read_file id 4266455660, 18044 characters)
  --changelog  docs/Changelog.md from the 10.15 GA release (entries 10.15 back to 7.2.1;
            code index read_file id 4424797173, 15440 characters):
              https://github.com/onnx/onnx-tensorrt/blob/release/10.15-GA/docs/Changelog.md

TensorRT 11.x: no onnx-tensorrt operators.md or Changelog for 11.x was available to us.
11.4 is the 10.15 table plus the parser changes that NVIDIA's TensorRT GitHub release
notes (github.com/NVIDIA/TensorRT/releases, tags v11.0 .. v11.4, "Parsers" sections) list
for 11.0-11.4. Those lines are quoted in this script but cannot be checked against an
input file; the output marks 11.4 as "derived_unverified". Anything 11.x removed from
the parser without a release note is invisible to this table.

    python tools/make_trt_op_table.py \\
        --operators 8.5-GA=src/operators_8.5.md --operators 8.6-GA=src/operators_8.6.md \\
        --operators 10.1-GA=src/operators_10.1.md --operators 10.15=src/operators_10.15.md \\
        --changelog src/Changelog_10.15.md --out aft_export/trtcheck/ops.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "aft_export" / "trtcheck" / "ops.json"

# Where each input file comes from (recorded verbatim in the output).
BASES = {
    "8.5-GA": {
        "repo": "onnx/onnx-tensorrt",
        "ref": "branch 8.5-GA",
        "commit": "fdeeaca87ad2eef316aafb016e1822502f383eea",
        "file": "docs/operators.md",
        "note": "branch head (2023-03-10, '8.5.3 update' + UINT8 QuantizeLinear check); importer "
        "sources identical to df60e73 'Integrate 8.5.2.2 changes' (TensorRT 8.5.2 = JetPack 5.1)",
    },
    "8.6-GA": {
        "repo": "onnx/onnx-tensorrt",
        "ref": "branch 8.6-GA",
        "commit": "ee0b139bc68567a89618c1d84dcd461cc144aad4",
        "file": "docs/operators.md",
        "note": "operators.md unchanged since 6ba67d3 'TensorRT 8.6.1 Parser Update' (2023-05-04); "
        "JetPack 6.0 ships TensorRT 8.6.2",
    },
    "10.1-GA": {
        "repo": "onnx/onnx-tensorrt",
        "ref": "branch 10.1-GA / tag release/10.1-GA",
        "commit": "96e781103cfc4adf4a6bb557e94bac8e693f6f4c",
        "file": "docs/operators.md",
        "note": "header still says 'TensorRT 10.0 supports operators in the inclusive range of opset 9 to opset 20'",
    },
    "10.15": {
        "repo": "onnx/onnx-tensorrt",
        "ref": "TensorRT 10.15 GA parser release (branch release/10.15-GA)",
        "commit": None,
        "index_id": "4266455660",
        "file": "docs/operators.md",
        "note": "text taken from the code index (read_file id 4266455660); the exact commit is not known to us",
    },
}
CHANGELOG_SOURCE = {
    "repo": "onnx/onnx-tensorrt",
    "ref": "TensorRT 10.15 GA parser release",
    "index_id": "4424797173",
    "file": "docs/Changelog.md",
}
NVIDIA_RELEASES = "github.com/NVIDIA/TensorRT/releases (tags v11.0 .. v11.4, 'Parsers' sections)"


def _unsupported(why: str) -> dict:
    return {"op": None, "set": {"supported": False, "types": [], "restrictions": ""}, "why": why}


# Derivation steps. "changelog" is a line that must occur in the --changelog file.
# "op" None is filled from the key of the step.
TARGETS: dict[str, dict] = {
    "8.5": {
        "base": "8.5-GA",
        "kind": "exact",
        "jetpack": "5.1",
        "steps": [],
    },
    "8.6": {
        "base": "8.6-GA",
        "kind": "exact",
        "jetpack": "6.0",
        "steps": [],
    },
    "10.3": {
        "base": "10.1-GA",
        "kind": "derived",
        "jetpack": "6.1/6.2",
        "derivation": "10.3 = 10.1-GA operators.md + Changelog entries 10.2 and 10.3 "
        "(10.2 lists no operator-table change; 10.3: Slice takes tensor axes)",
        "opset": {
            "min": 9,
            "max": 20,
            "basis": "10.1-GA header (which still names 10.0): opset 9 to 20. No Changelog line for 10.2/10.3 "
            "changes the opset range; the 10.3 operators.md header itself was not available.",
        },
        "steps": [
            {
                "op": "Slice",
                "set": {"restrictions": ""},
                "changelog": "- Added support for tensor `axes` inputs for `Slice` nodes",
                "why": "Changelog 10.3 GA: the 10.1 restriction '`axes` must be an initializer' is lifted "
                "(10.15 lists no Slice restriction)",
            },
            {
                "op": None,
                "set": None,
                "changelog": "- Minor changes to op importers for `GRU` and `Squeeze`",
                "why": "Changelog 10.2 GA: no documented table change",
            },
            {
                "op": None,
                "set": None,
                "changelog": "- Updated `ScatterElements` importer to use an updated plugin",
                "why": "Changelog 10.3 GA: no documented table change",
            },
        ],
    },
    "10.13": {
        "base": "10.15",
        "kind": "derived",
        "jetpack": None,
        "derivation": "10.13 = 10.15 operators.md minus the operators that Changelog 10.14 and 10.15 add "
        "(Attention; RotaryEmbedding, RMSNormalization, TensorScatter). Restriction or type changes "
        "made in 10.14/10.15 without a Changelog line are invisible here.",
        "opset": {
            "min": 9,
            "max": 23,
            "bounds": [20, 24],
            "basis": "inferred: 10.15 claims 9..24 and 10.1 claims 9..20; Changelog 10.11 'Updated ONNX version "
            "to `1.18`' (ONNX 1.18 = opset 23) is the last ONNX update before 10.13. The 10.13 header "
            "itself was not available.",
        },
        "steps": [
            {
                "op": "Attention",
                "set": {"supported": False, "types": [], "restrictions": ""},
                "changelog": "- Added support for the `Attention` operator",
                "why": "Changelog 10.14 GA adds it",
            },
            {
                "op": "RotaryEmbedding",
                "set": {"supported": False, "types": [], "restrictions": ""},
                "changelog": "- Added support for `RotaryEmbedding`, `RMSNormalization` and `TensorScatter` "
                "for improved LLM model support",
                "why": "Changelog 10.15 GA adds it",
            },
            {
                "op": "RMSNormalization",
                "set": {"supported": False, "types": [], "restrictions": ""},
                "changelog": "- Added support for `RotaryEmbedding`, `RMSNormalization` and `TensorScatter` "
                "for improved LLM model support",
                "why": "Changelog 10.15 GA adds it",
            },
            {
                "op": "TensorScatter",
                "set": {"supported": False, "types": [], "restrictions": ""},
                "changelog": "- Added support for `RotaryEmbedding`, `RMSNormalization` and `TensorScatter` "
                "for improved LLM model support",
                "why": "Changelog 10.15 GA adds it",
            },
        ],
    },
    "11.4": {
        "base": "10.15",
        "kind": "derived_unverified",
        "jetpack": "7.2.2+ (Orin, per TensorRT 11.4.1 release notes)",
        "derivation": "11.4 = 10.15 operators.md + the parser additions in NVIDIA's TensorRT GitHub release "
        "notes 11.0-11.4 (Swish; DFT; 5-D GridSample). No onnx-tensorrt 11.x operators.md or Changelog "
        "was available; removals or restriction changes without a release note are not reflected. "
        "Parser changes made in 10.16 (if any) are not reflected either.",
        "opset": {
            "min": 9,
            "max": 24,
            "bounds": [24, 24],
            "basis": "inferred: 10.15 claims 9..24 and the TensorRT 11.5 release notes say 'Added support for "
            "ONNX opset 25'; NVIDIA's 'latest' ONNX Opset Guide (11.x) says minimum 9, maximum 25 (that page "
            "post-dates 11.5).",
        },
        "steps": [
            {
                "op": "Swish",
                "set": {"supported": True, "types": [], "restrictions": ""},
                "release_note": "TensorRT v11.0 release, Parsers: 'Added support for Swish operator'",
                "why": "supported types not documented (left empty)",
            },
            {
                "op": "DFT",
                "set": {"supported": True, "types": [], "restrictions": ""},
                "release_note": "TensorRT v11.2 release, Parsers: 'Added support for the DFT operator and 5D "
                "GridSample operators.'",
                "why": "cuFFT-based plugin (11.2.1 release notes); supported types not documented (left empty)",
            },
            {
                "op": "GridSample",
                "set": {"restrictions": "Input must be 4D or 5D."},
                "release_note": "TensorRT v11.2 release, Parsers: 'Added support for the DFT operator and 5D "
                "GridSample operators.'",
                "why": "10.15 says 'Input must be 4D input.'; 11.2 adds 5-D",
            },
        ],
    },
}

_HEADER_RANGE = re.compile(
    r"TensorRT\s+([0-9.]+)\s+supports operators in the inclusive range of opset\s+(\d+)\s+to opset\s+(\d+)",
    re.IGNORECASE,
)
_HEADER_UPTO = re.compile(r"TensorRT\s+([0-9.]+)\s+supports operators up to Opset\s+(\d+)", re.IGNORECASE)
_DTYPES = re.compile(r"^TensorRT supports the following ONNX data types:\s*(.+)$", re.MULTILINE)


def parse_operators_md(text: str) -> dict:
    """Parse one onnx-tensorrt docs/operators.md: header claims and the operator table."""
    header: dict = {"doc_version": None, "opset_min": None, "opset_max": None, "claim": None}
    m = _HEADER_RANGE.search(text)
    if m:
        header.update(doc_version=m.group(1), opset_min=int(m.group(2)), opset_max=int(m.group(3)))
        header["claim"] = m.group(0)
    else:
        m = _HEADER_UPTO.search(text)
        if m:
            header.update(doc_version=m.group(1), opset_max=int(m.group(2)))
            header["claim"] = m.group(0)
    d = _DTYPES.search(text)
    header["data_types"] = d.group(1).strip() if d else None
    header["notes"] = [ln.lstrip("> ").strip() for ln in text.splitlines() if ln.startswith("> Note")]

    ops: dict[str, dict] = {}
    in_table = False
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith("|"):
            in_table = False if in_table and not s else in_table
            continue
        cells = [c.strip() for c in s.strip("|").split("|")]
        if cells and cells[0] == "Operator":
            in_table = True
            continue
        if not in_table or set(cells[0]) <= set("-: "):
            continue
        name = cells[0]
        supported = cells[1].upper() if len(cells) > 1 else ""
        if supported not in ("Y", "N"):
            raise ValueError(f"operators.md row for {name!r}: Supported column is {supported!r}")
        types_cell = cells[2] if len(cells) > 2 else ""
        restr = " | ".join(c for c in cells[3:] if c) if len(cells) > 3 else ""
        types = [t.strip() for t in types_cell.split(",") if t.strip()]
        if supported == "N" and types and not all(re.fullmatch(r"[A-Z0-9]+", t) for t in types):
            # e.g. DynamicQuantizeLinear: "N | Not supported. ..." - the prose is a restriction, not types
            restr, types = types_cell if not restr else f"{types_cell} {restr}", []
        if name in ops:
            raise ValueError(f"operators.md lists {name!r} twice")
        ops[name] = {"supported": supported == "Y", "types": types, "restrictions": restr}
    if not ops:
        raise ValueError("no operator table found")
    return {"header": header, "operators": ops}


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def build(operators: dict[str, str], changelog: str | None) -> dict:
    parsed = {k: parse_operators_md(v) for k, v in operators.items()}
    out_versions: dict[str, dict] = {}
    for version, target in TARGETS.items():
        base = target["base"]
        if base not in parsed:
            raise SystemExit(f"TensorRT {version} needs --operators {base}=PATH")
        table = {k: dict(v, types=list(v["types"])) for k, v in parsed[base]["operators"].items()}
        header = parsed[base]["header"]
        steps_done = []
        for step in target["steps"]:
            quote = step.get("changelog")
            if quote is not None:
                if changelog is None:
                    raise SystemExit(f"TensorRT {version} is derived from Changelog lines: pass --changelog")
                if quote not in changelog:
                    raise SystemExit(f"Changelog line not found (TensorRT {version}): {quote!r}")
            if step["op"] is not None:
                row = table.setdefault(step["op"], {"supported": False, "types": [], "restrictions": ""})
                row.update(step["set"])
                row["derived"] = step["why"]
            steps_done.append(
                {
                    k: step[k]
                    for k in ("op", "set", "changelog", "release_note", "why")
                    if step.get(k) is not None
                }
            )
        opset = target.get("opset") or {
            "min": header["opset_min"],
            "max": header["opset_max"],
            "basis": f"operators.md header: {header['claim']!r}"
            + ("" if header["opset_min"] is not None else "; the 8.x docs state no minimum "
               "(ModelImporter.cpp only warns below opset 7)"),
        }
        src = dict(BASES[base])
        src["sha256"] = _sha256(operators[base])
        entry = {
            "kind": target["kind"],
            "jetpack": target["jetpack"],
            "source": src,
            "derivation": target.get("derivation", f"{version} = {base} docs/operators.md as is"),
            "doc_header": header,
            "opset": opset,
            "steps": steps_done,
            "operators": dict(sorted(table.items(), key=lambda kv: kv[0].lower())),
        }
        if any("changelog" in s for s in target["steps"]):
            entry["changelog_source"] = dict(CHANGELOG_SOURCE, sha256=_sha256(changelog or ""))
        if any("release_note" in s for s in target["steps"]):
            entry["release_notes_source"] = NVIDIA_RELEASES
        out_versions[version] = entry
    return {
        "schema": 1,
        "generated_by": "tools/make_trt_op_table.py",
        "what": "onnx-tensorrt docs/operators.md claims per TensorRT version (documentation, not the importer "
        "code); see each version's source/derivation. An operator absent from a version's table is not "
        "documented for it: treat it as unsupported (e.g. CastLike and Gelu in 8.5/8.6, which have no "
        "importer there and fall through to the plugin lookup).",
        "versions": out_versions,
    }


def _pairs(values: list[str]) -> dict[str, str]:
    out = {}
    for v in values:
        key, sep, path = v.partition("=")
        if not sep:
            raise SystemExit(f"--operators takes KEY=PATH, got {v!r}")
        if key not in BASES:
            raise SystemExit(f"unknown operators.md key {key!r}; known: {', '.join(BASES)}")
        out[key] = Path(path).read_text(encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--operators", action="append", default=[], metavar="KEY=PATH",
                    help=f"an operators.md file; KEY is one of {', '.join(BASES)}")
    ap.add_argument("--changelog", type=Path, help="onnx-tensorrt docs/Changelog.md of the 10.15 GA release")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    ops = _pairs(args.operators)
    changelog = args.changelog.read_text(encoding="utf-8") if args.changelog else None
    data = build(ops, changelog)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    for v, e in data["versions"].items():
        n = sum(1 for r in e["operators"].values() if r["supported"])
        print(f"TensorRT {v}: {n} supported of {len(e['operators'])} listed, opset "
              f"{e['opset']['min']}..{e['opset']['max']} ({e['kind']})")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
