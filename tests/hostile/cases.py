"""The hostile-input table: every case is one command line, the files it starts from, and
what must happen (exit code, and what the one ``error:`` line says).

Cases are generated from small tables (bad values per option, bad files per input slot,
outputs that alias an input per writing command) plus hand-written ones for the crafted
files of :mod:`tests.hostile.world`. ``{d}`` in an argument is the case's directory.

Kinds:
  crash      crafted or malformed files that reached a traceback
  files      every input slot given a missing, empty, corrupt or wrong-type file
  destroys   an output path that is an input (same path, symlink, hardlink), a device,
             a fifo, a directory
  nonsense   counts, sizes, thresholds and tolerances out of range, NaN, infinity
  nonfinite  weights or outputs that are NaN/Inf, weights of the wrong dtype
  cost       images whose pixel count is absurd, batches that cannot fit in memory
  usage      click's own errors (unknown command or option, missing argument, bad choice)
  exit       the exit-code table: 3 for "nothing failed but something was not verified"
  readers    what a user hands us, read defensively (issue 35): preprocessing files and the JSON
             beside another tool's file, ONNX metadata values, engine manifests, regular
             expressions; and what another tool's file is, said before any advice
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    argv: tuple[str, ...]
    code: int  # expected exit status
    expect: str = ""  # regex (case-insensitive) the error line (or, for 0/3, the output) must match
    setup: tuple[str, ...] = ()  # world.SETUPS steps run in the case directory first
    creates: tuple[str, ...] = ()  # glob patterns of files a run may add (exit 0, 1 or 3 only)
    root: bool = False  # needs root (mknod)
    base: bool = True  # also run against the base commit (False: it would exhaust the machine there)

    @property
    def command(self) -> str:
        return self.argv[0]


D = "{d}"
OUT = f"{D}/out"
QOPTS = ("--precision", "int8", "--count", "8")
BASE = {
    "models": ("models",),
    "info": ("info", f"{D}/m.pt"),
    "train": ("train", "--model", "aft_simple_test", "--data", f"{D}/imgs", "--out", f"{OUT}/t.pt", "--epochs", "1",
              "--limit", "20", "--no-progress"),
    "export": ("export", f"{D}/m.pt", "-o", f"{OUT}/x.onnx", "--verify-images", "4", "--verify-data", f"{D}/imgs"),
    "quantize": ("quantize", f"{D}/m.onnx", "-o", f"{OUT}/q.onnx", "--calib", f"{D}/calib.npy", *QOPTS),
    "parity": ("parity", f"{D}/m.pt", f"{D}/m.onnx", "--data", f"{D}/imgs", "--images", "4"),
    "bench": ("bench", f"{D}/m.onnx", "--batch", "1", "--warmup", "0", "--iters", "1"),
    "pipeline": ("pipeline", f"{D}/m.pt", "--out", f"{OUT}/run", "--calib", f"{D}/recipe.json", "--data",
                 f"{D}/imgs", "--precision", "int8", "--eval-limit", "10", "--parity-images", "4", "--batch", "1",
                 "--iters", "1"),
    "check": ("check", f"{D}/m.onnx"),
    "build": ("build", f"{D}/m.onnx", "-o", f"{OUT}/m.engine"),
    "infer": ("infer", f"{D}/m.onnx", f"{D}/imgs/k0/0.png"),
    "eval": ("eval", f"{D}/m.onnx", "--data", f"{D}/imgs"),
}  # fmt: skip

# ---------------------------------------------------------------- nonsense: values out of range

NAN, INF = "nan", "inf"
BAD_VALUES = {
    ("train", "--epochs"): ["0", "-1"],
    ("train", "--batch-size"): ["0", "-3"],
    ("train", "--lr"): [NAN, INF, "-1", "0"],
    ("train", "--weight-decay"): [NAN, "-0.1"],
    ("train", "--warmup-epochs"): [NAN, "-1"],
    ("train", "--label-smoothing"): ["1.5", NAN, "-0.1"],
    ("train", "--val-fraction"): ["1.0", NAN, "-0.5"],
    ("train", "--seed"): ["-1"],
    ("train", "--threads"): ["-1"],
    ("train", "--limit"): ["0", "-5"],
    ("export", "--verify-images"): ["-1"],
    ("export", "--batch"): ["0", "-1", "65537", NAN],
    ("export", "--opset"): ["0", "99999"],
    ("quantize", "--percentile"): ["0", NAN, "101", INF],
    ("quantize", "--count"): ["0", "-5"],
    ("quantize", "--batch-size"): ["0", "-1"],
    ("quantize", "--seed"): ["-1"],
    ("quantize", "--budget"): [NAN, "-1", INF],
    ("quantize", "--input-size"): ["0", "-32"],
    ("quantize", "--mean"): ["nan,0,0", "1,2", "inf,0,0"],
    ("quantize", "--std"): ["0,1,1", "nan,1,1", "-1,1,1"],
    ("parity", "--images"): ["0", "-5"],
    ("bench", "--batch"): ["0", "-1"],
    ("bench", "--warmup"): ["-1"],
    ("bench", "--iters"): ["0", "-1"],
    ("bench", "--threads"): ["-1"],
    ("pipeline", "--eval-limit"): ["0", "-5"],
    ("pipeline", "--parity-images"): ["0", "-1"],
    ("pipeline", "--batch"): ["0"],
    ("pipeline", "--iters"): ["0"],
    ("pipeline", "--threads"): ["-1"],
    ("build", "--workspace-mb"): ["0", "-1"],
    ("build", "--dla-core"): ["-1"],
    ("build", "--batch"): ["0", "-1,2,3", NAN],
    ("infer", "--top-k"): ["0", "-1"],
    ("eval", "--batch-size"): ["0", "-1"],
    ("eval", "--limit"): ["0", "-5"],
}
# thousands of threads for a 2-core machine: refused here, but at the base commit ONNX
# Runtime would start them all
HUGE_THREADS = {("bench", "--threads"): "100000", ("pipeline", "--threads"): "100000",
                ("train", "--threads"): "100000"}  # fmt: skip
TOLERANCES = ["int8.max_abs=nan", "fp32.min_cosine=nan", "fp32.min_cosine=1.5", "fp16.max_abs=-1",
              "fp32.max_abs=inf", "fp32.min_top1_agreement=2", "fp32.tie_margin=-1", "int8.stress_min_cosine=nan",
              "fp32.min_cosine=0", "fp32.min_cosine=-0.5", "bogus", "fp64.max_abs=1", "fp32.nope=1", "fp32.max_abs=abc"]  # fmt: skip


def _nonsense() -> list[Case]:
    cases = []
    for (cmd, opt), values in BAD_VALUES.items():
        for v in values:
            cases.append(Case(f"{cmd}/{opt}={v}", "nonsense", (*BASE[cmd], opt, v), 2, opt))
    for (cmd, opt), v in HUGE_THREADS.items():
        cases.append(Case(f"{cmd}/{opt}={v}", "nonsense", (*BASE[cmd], opt, v), 2, opt, base=False))
    for tol in TOLERANCES:
        cases.append(
            Case(
                f"parity/--tolerance {tol}", "nonsense", (*BASE["parity"], "--tolerance", tol), 2, "tolerance"
            )
        )
    for tol in TOLERANCES[:3]:
        cases.append(
            Case(
                f"pipeline/--tolerance {tol}",
                "nonsense",
                (*BASE["pipeline"], "--tolerance", tol),
                2,
                "tolerance",
            )
        )
    return cases


# ---------------------------------------------------------------- files: each input slot, each bad file

MISSING, EMPTY, JUNK, DIRECTORY = ("does not exist", "is empty", r"corrupt|not a readable|not a valid|cannot read|"
                                   r"is not a|truncated|not an onnx", "is a directory")  # fmt: skip
# (command, argv with {f} for the slot, slot name, [(variant, file, expected)])
CKPT_FILES = [("missing", "nope.pt", MISSING), ("empty", "empty.pt", EMPTY), ("junk", "junk.pt", JUNK),
              ("dir", "dir.pt", DIRECTORY)]  # fmt: skip
ONNX_FILES = [("missing", "nope.onnx", MISSING), ("empty", "empty.onnx", EMPTY), ("junk", "junk.onnx", JUNK),
              ("dir", "dir.onnx", DIRECTORY)]  # fmt: skip
DATA_FILES = [("missing", "nope", MISSING), ("junk-tar", "junk.tar", r"neither|not a tar|cannot"),
              ("empty-tar", "empty.tar", r"empty|neither|no images"), ("empty-dir", "emptydir", "no images"),
              ("truncated-tar", "trunc.tar", r"truncated|cannot read|corrupt")]  # fmt: skip
SLOTS = [
    ("info", ("info", "{f}"), "ARTIFACT", CKPT_FILES + [(f"{v}-onnx", n, e) for v, n, e in ONNX_FILES]),
    ("export", ("export", "{f}", "-o", f"{OUT}/x.onnx", "--verify-images", "0"), "CHECKPOINT", CKPT_FILES),
    ("export", ("export", f"{D}/m.pt", "-o", f"{OUT}/x.onnx", "--verify-images", "4", "--verify-data", "{f}"),
     "--verify-data", DATA_FILES),
    ("quantize", ("quantize", "{f}", "-o", f"{OUT}/q.onnx", "--calib", f"{D}/calib.npy", *QOPTS), "MODEL",
     ONNX_FILES),
    ("quantize", ("quantize", f"{D}/m.onnx", "-o", f"{OUT}/q.onnx", "--calib", "{f}", *QOPTS), "--calib",
     [("missing", "nope", MISSING), ("empty-npy", "empty.npy", r"empty|cannot read"),
      ("junk-npy", "junk.npy", r"cannot read|corrupt"), ("junk-tar", "junk.tar", r"not a directory of images|cannot"),
      ("empty-dir", "emptydir", "no images"), ("empty-recipe", "empty.json", r"empty|malformed"),
      ("junk-recipe", "junk.json", "malformed"), ("truncated-tar", "trunc.tar", r"truncated|cannot read|corrupt"),
      ("nan-npy", "nan.npy", r"nan|inf"), ("inf-npy", "inf.npy", r"nan|inf")]),
    ("parity", ("parity", "{f}", f"{D}/m.onnx", "--data", f"{D}/imgs"), "CHECKPOINT", CKPT_FILES),
    ("parity", ("parity", f"{D}/m.pt", "{f}", "--data", f"{D}/imgs"), "ARTIFACT", ONNX_FILES),
    ("parity", ("parity", f"{D}/m.pt", f"{D}/m.onnx", "--data", "{f}"), "--data", DATA_FILES),
    ("bench", ("bench", "{f}", "--iters", "1", "--warmup", "0"), "ARTIFACT",
     ONNX_FILES + [("unknown-type", "txt.txt", "unknown artifact type"),
                   ("junk-engine", "junk.engine", r"manifest|does not exist|cannot")]),
    ("eval", ("eval", "{f}", "--data", f"{D}/imgs"), "ARTIFACT", ONNX_FILES),
    ("eval", ("eval", f"{D}/m.onnx", "--data", "{f}"), "--data", DATA_FILES),
    ("infer", ("infer", "{f}", f"{D}/imgs/k0/0.png"), "ARTIFACT", ONNX_FILES),
    ("infer", ("infer", f"{D}/m.onnx", "{f}"), "IMAGE",
     [("missing", "nope.png", MISSING), ("junk", "junk.png", "cannot read image"), ("empty", "empty",
      r"cannot read image|empty"), ("empty-dir", "emptydir", "no images"), ("text", "txt.txt", "cannot read image"),
      ("16-bit", "i16.png", "16-bit")]),
    ("check", ("check", "{f}"), "MODEL", ONNX_FILES),
    ("build", ("build", "{f}", "-o", f"{OUT}/m.engine"), "MODEL", ONNX_FILES),
    ("train", ("train", "--model", "aft_simple_test", "--data", "{f}", "--out", f"{OUT}/t.pt", "--epochs", "1",
               "--no-progress"), "--data", DATA_FILES),
    ("train", (*BASE["train"], "--resume", "{f}"), "--resume", CKPT_FILES[:3]),
    ("train", (*BASE["train"], "--test-data", "{f}"), "--test-data", DATA_FILES[:1]),
    ("pipeline", ("pipeline", "{f}", *BASE["pipeline"][2:]), "CHECKPOINT", CKPT_FILES),
    ("pipeline", (*BASE["pipeline"], "--calib", "{f}"), "--calib", [("missing", "nope", MISSING)]),
    ("pipeline", (*BASE["pipeline"], "--data", "{f}"), "--data", DATA_FILES[:1] + DATA_FILES[3:4]),
]  # fmt: skip
SETUP_OF = {"empty.pt": "empty.pt", "junk.pt": "junk.pt", "dir.pt": "dir.pt", "empty.onnx": "empty.onnx",
            "junk.onnx": "junk.onnx", "dir.onnx": "dir.onnx", "junk.tar": "junk.tar", "empty.tar": "empty.tar",
            "emptydir": "emptydir", "trunc.tar": "trunc.tar", "empty.npy": "empty.npy", "junk.npy": "junk.npy",
            "empty.json": "empty.json", "junk.json": "junk.json", "junk.png": "junk.png", "empty": "empty",
            "txt.txt": "txt.txt", "junk.engine": "junk.engine", "i16.png": "i16.png", "nan.npy": "nan.npy",
            "inf.npy": "inf.npy"}  # fmt: skip


def _files() -> list[Case]:
    cases = []
    for cmd, argv, slot, variants in SLOTS:
        for variant, name, expected in variants:
            args = tuple(a.replace("{f}", f"{D}/{name}") for a in argv)
            setup = (SETUP_OF[name],) if name in SETUP_OF else ()
            cases.append(Case(f"{cmd}/{slot} {variant}", "files", args, 2, expected, setup))
    return cases


# ---------------------------------------------------------------- destroys: outputs that are inputs or not files

SAME = "overwrite|is an input|same file"
NOT_REGULAR = "not a regular file|is a directory|fifo|device"


def _destroys() -> list[Case]:
    writers = [
        # (command, argv with {o} for the output, [(variant, output, setup, expected, root)])
        ("export", ("export", f"{D}/m.pt", "-o", "{o}", "--verify-images", "0"),
         [("same-path", f"{D}/m.pt", (), SAME), ("symlink", f"{D}/link.pt", ("link.pt",), SAME),
          ("hardlink", f"{D}/hard.pt", ("hard.pt",), SAME), ("fifo", f"{D}/fifo", ("fifo",), NOT_REGULAR),
          ("device", f"{D}/null", ("null",), NOT_REGULAR), ("directory", f"{D}/out", (), NOT_REGULAR),
          ("parent-is-file", f"{D}/m.pt/x.onnx", (), "not a directory|does not exist")]),
        ("export", ("export", f"{D}/m.pt", "-o", "{o}", "--verify-data", f"{D}/data.tar", "--verify-images", "4"),
         [("verify-data", f"{D}/data.tar", (), SAME), ("verify-data-hardlink", f"{D}/hard.tar", ("hard.tar",), SAME)]),
        ("export", ("export", "--model-def", f"{D}/mdl.py:build", "--weights", f"{D}/w.safetensors", "--input-size",
                    "32", "--mean", "0.5,0.5,0.5", "--std", "0.5,0.5,0.5", "--classes", f"{D}/classes.txt",
                    "--verify-images", "0", "-o", "{o}"),
         [("weights", f"{D}/w.safetensors", ("mdl.py",), SAME), ("model-def", f"{D}/mdl.py", ("mdl.py",), SAME),
          ("classes", f"{D}/classes.txt", ("mdl.py",), SAME)]),
        ("quantize", ("quantize", f"{D}/m.onnx", "-o", "{o}", "--calib", f"{D}/calib.npy", *QOPTS),
         [("same-path", f"{D}/m.onnx", (), SAME), ("symlink", f"{D}/link.onnx", ("link.onnx",), SAME),
          ("hardlink", f"{D}/hard.onnx", ("hard.onnx",), SAME), ("calib", f"{D}/calib.npy", (), SAME),
          ("fifo", f"{D}/fifo.onnx", ("fifo.onnx",), NOT_REGULAR), ("device", f"{D}/null", ("null",), NOT_REGULAR),
          ("directory", f"{D}/out", (), NOT_REGULAR)]),
        ("quantize", ("quantize", f"{D}/m.onnx", "-o", "{o}", "--calib", f"{D}/recipe.json", *QOPTS),
         [("recipe", f"{D}/recipe.json", (), SAME)]),
        ("train", ("train", "--model", "aft_simple_test", "--data", f"{D}/data.tar", "--out", "{o}", "--epochs", "1",
                   "--limit", "20", "--no-progress"),
         [("data", f"{D}/data.tar", (), SAME), ("data-hardlink", f"{D}/hard.tar", ("hard.tar",), SAME),
          ("fifo", f"{D}/fifo", ("fifo",), NOT_REGULAR), ("device", f"{D}/null", ("null",), NOT_REGULAR)]),
        ("train", ("train", "--model", "aft_simple_test", "--data", f"{D}/imgs", "--test-data", f"{D}/data.tar",
                   "--out", "{o}", "--epochs", "1", "--limit", "20", "--no-progress"),
         [("test-data", f"{D}/data.tar", (), SAME)]),
        ("build", ("build", f"{D}/m.onnx", "-o", "{o}"),
         [("same-path", f"{D}/m.onnx", (), SAME), ("hardlink", f"{D}/hard.onnx", ("hard.onnx",), SAME),
          ("fifo", f"{D}/fifo", ("fifo",), NOT_REGULAR), ("device", f"{D}/null", ("null",), NOT_REGULAR)]),
        ("build", ("build", f"{D}/m.onnx", "-o", f"{OUT}/m.engine", "--timing-cache", "{o}"),
         [("timing-cache-is-model", f"{D}/m.onnx", (), SAME)]),
        ("pipeline", ("pipeline", f"{D}/m.pt", *BASE["pipeline"][2:], "--out", "{o}"),
         [("out-is-checkpoint", f"{D}/m.pt", (), r"is a file|not a directory"),
          ("out-is-data", f"{D}/imgs", (), r"is the input"),
          ("out-is-fifo", f"{D}/fifo", ("fifo",), r"not a directory|exists|fifo")]),
    ]  # fmt: skip
    cases = []
    for cmd, argv, variants in writers:
        for variant, out, setup, expected in variants:
            args = tuple(a.replace("{o}", out) for a in argv)
            cases.append(Case(f"{cmd}/output {variant}", "destroys", args, 2, expected, setup,
                              root="null" in setup))  # fmt: skip
    return cases


# ---------------------------------------------------------------- crafted files that reached tracebacks

CRASH = [
    Case("infer/decompression bomb", "cost", ("infer", f"{D}/m.onnx", f"{D}/bomb.png"), 2, "pixels",
         ("bomb.png",)),
    Case("eval/decompression bomb in the data", "cost", ("eval", f"{D}/m.onnx", "--data", f"{D}/imgs"), 2, "pixels",
         ("bomb_in_imgs",)),
    Case("eval/decompression bomb in a tar", "cost", ("eval", f"{D}/m.onnx", "--data", f"{D}/bomb.tar"), 2, "pixels",
         ("bomb.tar",)),
    Case("quantize/decompression bomb in calibration", "cost",
         ("quantize", f"{D}/m.onnx", "-o", f"{OUT}/q.onnx", "--calib", f"{D}/imgs", "--precision", "int8", "--count",
          "21"), 2, "pixels", ("bomb_in_imgs",)),
    Case("parity/decompression bomb in the data", "cost", (*BASE["parity"][:3], "--data", f"{D}/bomb.tar"), 2,
         "pixels", ("bomb.tar",)),
    Case("infer/1x100000 image", "cost", ("infer", f"{D}/m.onnx", f"{D}/wide.png"), 0, "wide.png", ("wide.png",)),
    Case("infer/100000x1 image", "cost", ("infer", f"{D}/m.onnx", f"{D}/tall.png"), 0, "tall.png", ("tall.png",)),
    Case("export/--batch 65536 beyond memory", "cost",
         ("export", f"{D}/big.pt", "-o", f"{OUT}/x.onnx", "--batch", "65536", "--verify-images", "0"), 2,
         r"needs about .* available", ("big.pt",), base=False),
    Case("train/--batch-size beyond memory", "cost",
         ("train", "--model", "aft_full_small_224", "--data", f"{D}/imgs", "--out", f"{OUT}/t.pt", "--batch-size",
          "65536", "--epochs", "1", "--no-progress"), 2, r"needs about .* available", (), base=False),
    Case("build/zero-byte onnx", "crash", ("build", f"{D}/zero.onnx", "-o", f"{OUT}/m.engine"), 2, "empty",
         ("zero.onnx",)),
    Case("check/zero-byte onnx", "crash", ("check", f"{D}/zero.onnx"), 2, "empty", ("zero.onnx",)),
    Case("eval/--batch-size 0", "crash", (*BASE["eval"], "--batch-size", "0"), 2, "--batch-size"),
    Case("quantize/recipe source is a number", "crash",
         ("quantize", f"{D}/m.onnx", "-o", f"{OUT}/q.onnx", "--calib", f"{D}/recipe_num.json", "--precision", "int8"),
         2, "source", ("recipe_num.json",)),
    Case("quantize/recipe is a list", "crash",
         ("quantize", f"{D}/m.onnx", "-o", f"{OUT}/q.onnx", "--calib", f"{D}/recipe_list.json", "--precision",
          "int8"), 2, "recipe", ("recipe_list.json",)),
    Case("quantize/recipe without source", "crash",
         ("quantize", f"{D}/m.onnx", "-o", f"{OUT}/q.onnx", "--calib", f"{D}/recipe_nosource.json", "--precision",
          "int8"), 2, "source", ("recipe_nosource.json",)),
    Case("quantize/recipe count -5", "nonsense",
         ("quantize", f"{D}/m.onnx", "-o", f"{OUT}/q.onnx", "--calib", f"{D}/recipe_negcount.json", "--precision",
          "int8"), 2, "count", ("recipe_negcount.json",)),
    Case("quantize/recipe count 'many'", "crash",
         ("quantize", f"{D}/m.onnx", "-o", f"{OUT}/q.onnx", "--calib", f"{D}/recipe_strcount.json", "--precision",
          "int8"), 2, "count", ("recipe_strcount.json",)),
    Case("quantize/recipe seed -1", "crash",
         ("quantize", f"{D}/m.onnx", "-o", f"{OUT}/q.onnx", "--calib", f"{D}/recipe_badseed.json", "--precision",
          "int8"), 2, "seed", ("recipe_badseed.json",)),
    Case("quantize/recipe source missing", "files",
         ("quantize", f"{D}/m.onnx", "-o", f"{OUT}/q.onnx", "--calib", f"{D}/recipe_missing.json", "--precision",
          "int8"), 2, "does not exist", ("recipe_missing.json",)),
    Case("pipeline/recipe source is a number", "crash", (*BASE["pipeline"], "--calib", f"{D}/recipe_num.json"), 2,
         "source", ("recipe_num.json",)),
    Case("train/--lr nan", "crash", (*BASE["train"], "--lr", "nan"), 2, "--lr"),
    Case("eval/truncated tar", "crash", ("eval", f"{D}/m.onnx", "--data", f"{D}/trunc.tar"), 2,
         r"truncated|cannot read", ("trunc.tar",)),
    Case("eval/an unreadable image among good ones", "crash", ("eval", f"{D}/m.onnx", "--data", f"{D}/imgs"), 2,
         "cannot read image", ("garbage_in_imgs",)),
    Case("quantize/an unreadable image among good ones", "crash",
         ("quantize", f"{D}/m.onnx", "-o", f"{OUT}/q.onnx", "--calib", f"{D}/imgs", "--precision", "int8", "--count",
          "21"), 2, "cannot read image", ("garbage_in_imgs",)),
    *[Case(f"{cmd}/onnx with a second input", "crash", argv, 2, "input", ("two_inputs.onnx",)) for cmd, argv in [
        ("infer", ("infer", f"{D}/two_inputs.onnx", f"{D}/imgs/k0/0.png")),
        ("eval", ("eval", f"{D}/two_inputs.onnx", "--data", f"{D}/imgs")),
        ("bench", ("bench", f"{D}/two_inputs.onnx", "--iters", "1", "--warmup", "0", "--batch", "1")),
        ("parity", ("parity", f"{D}/m.pt", f"{D}/two_inputs.onnx", "--data", f"{D}/imgs", "--images", "4")),
        ("quantize", ("quantize", f"{D}/two_inputs.onnx", "-o", f"{OUT}/q.onnx", "--calib", f"{D}/calib.npy",
                      *QOPTS))]],
    *[Case(f"{cmd}/metadata input_size disagrees with the graph", "crash", argv, 2, "input",
           ("meta_size.onnx",)) for cmd, argv in [
        ("infer", ("infer", f"{D}/meta_size.onnx", f"{D}/imgs/k0/0.png")),
        ("eval", ("eval", f"{D}/meta_size.onnx", "--data", f"{D}/imgs")),
        ("bench", ("bench", f"{D}/meta_size.onnx", "--iters", "1", "--warmup", "0", "--batch", "1")),
        ("quantize", ("quantize", f"{D}/meta_size.onnx", "-o", f"{OUT}/q.onnx", "--calib", f"{D}/calib.npy",
                      *QOPTS))]],
    *[Case(f"{cmd}/metadata class count disagrees with the graph", "crash", argv, 2, "class",
           ("meta_classes.onnx",)) for cmd, argv in [
        ("infer", ("infer", f"{D}/meta_classes.onnx", f"{D}/imgs/k0/0.png")),
        ("eval", ("eval", f"{D}/meta_classes.onnx", "--data", f"{D}/imgs")),
        ("parity", ("parity", f"{D}/m.pt", f"{D}/meta_classes.onnx", "--data", f"{D}/imgs", "--images", "4"))]],
    Case("infer/metadata mean is not JSON", "crash", ("infer", f"{D}/meta_junk.onnx", f"{D}/imgs/k0/0.png"), 2,
         "metadata", ("meta_junk.onnx",)),
    Case("infer/metadata std is NaN", "crash", ("infer", f"{D}/meta_nan.onnx", f"{D}/imgs/k0/0.png"), 2,
         r"std|metadata", ("meta_nan.onnx",)),
    Case("eval/metadata input size 0", "crash", ("eval", f"{D}/meta_zero_size.onnx", "--data", f"{D}/imgs"), 2,
         "input", ("meta_zero_size.onnx",)),
    Case("infer/onnx without metadata", "files", ("infer", f"{D}/no_meta.onnx", f"{D}/imgs/k0/0.png"), 2,
         "metadata", ("no_meta.onnx",)),
    Case("info/checkpoint with an unknown variant", "crash", ("info", f"{D}/badcfg.pt"), 2, "variant",
         ("badcfg.pt",)),
    Case("info/checkpoint with 3 class names for 10 outputs", "crash", ("info", f"{D}/fewclasses.pt"), 2, "class",
         ("fewclasses.pt",)),
    Case("bench/fixed-batch graph at another batch only", "exit",
         ("bench", f"{D}/b2.onnx", "--batch", "1", "--iters", "1", "--warmup", "0"), 3, "fixed batch",
         ("b2.onnx",)),
]  # fmt: skip

# ---------------------------------------------------------------- non-finite and wrongly typed weights

NONFINITE = [
    Case("export/NaN weights with --verify-images 0", "nonfinite",
         ("export", f"{D}/nan.pt", "-o", f"{OUT}/x.onnx", "--verify-images", "0"), 2, r"nan|not finite", ("nan.pt",)),
    Case("export/Inf weights with --verify-images 0", "nonfinite",
         ("export", f"{D}/inf.pt", "-o", f"{OUT}/x.onnx", "--verify-images", "0"), 2, r"inf|not finite", ("inf.pt",)),
    Case("parity/NaN reference", "nonfinite", ("parity", f"{D}/nan.pt", f"{D}/m.onnx", "--data", f"{D}/imgs"), 2,
         r"nan|not finite", ("nan.pt",)),
    Case("infer/NaN weights", "nonfinite", ("infer", f"{D}/nan.pt", f"{D}/imgs/k0/0.png"), 2, r"nan|not finite",
         ("nan.pt",)),
    Case("eval/NaN weights", "nonfinite", ("eval", f"{D}/nan.pt", "--data", f"{D}/imgs"), 2, r"nan|not finite",
         ("nan.pt",)),
    Case("infer/onnx with a NaN weight", "nonfinite", ("infer", f"{D}/nan.onnx", f"{D}/imgs/k0/0.png"), 2,
         r"nan or infinite logits", ("nan.onnx",)),
    Case("eval/onnx with a NaN weight", "nonfinite", ("eval", f"{D}/nan.onnx", "--data", f"{D}/imgs"), 2,
         r"nan or infinite logits", ("nan.onnx",)),
    Case("parity/onnx with a NaN weight fails", "nonfinite", ("parity", f"{D}/m.pt", f"{D}/nan.onnx", "--data",
         f"{D}/imgs", "--images", "4"), 1, r"NaN/Inf outputs", ("nan.onnx",)),
    # ONNX Runtime's quantiser ended in "AssertionError: scale issue" (issue 27); fp16 wrote NaN weights
    Case("quantize/int8 of an onnx with a NaN weight", "nonfinite", ("quantize", f"{D}/nan.onnx", "-o",
         f"{OUT}/q.onnx", "--calib", f"{D}/calib.npy", *QOPTS), 2, r"weight '[^']+' holds 1 NaN", ("nan.onnx",)),
    Case("quantize/int8 of an onnx with an Inf weight", "nonfinite", ("quantize", f"{D}/inf.onnx", "-o",
         f"{OUT}/q.onnx", "--calib", f"{D}/calib.npy", *QOPTS), 2, r"weight '[^']+' holds 1 infinite", ("inf.onnx",)),
    Case("quantize/fp16 of an onnx with a NaN weight", "nonfinite", ("quantize", f"{D}/nan.onnx", "-o",
         f"{OUT}/q.onnx", "--precision", "fp16"), 2, r"weight '[^']+' holds 1 NaN", ("nan.onnx",)),
    Case("bench/NaN weights", "nonfinite", ("bench", f"{D}/nan.pt", "--iters", "1", "--warmup", "0", "--batch", "1"),
         2, r"nan|not finite", ("nan.pt",)),
    Case("pipeline/NaN weights", "nonfinite", ("pipeline", f"{D}/nan.pt", *BASE["pipeline"][2:]), 2,
         r"nan|not finite", ("nan.pt",)),
    Case("info/int32 safetensors for a float model", "nonfinite",
         ("info", f"{D}/int32.safetensors", "--config", "aft_simple_test"), 2, r"int32|dtype",
         ("int32.safetensors",)),
    Case("export/int32 safetensors for a float model", "nonfinite",
         ("export", f"{D}/int32.safetensors", "--config", "aft_simple_test", "-o", f"{OUT}/x.onnx", "--verify-images",
          "0"), 2, r"int32|dtype", ("int32.safetensors",)),
    Case("export/int32 safetensors for a model trained elsewhere", "nonfinite",
         ("export", "--model-def", f"{D}/mdl.py:build", "--weights", f"{D}/int32.safetensors", "--input-size", "32",
          "--mean", "0.5,0.5,0.5", "--std", "0.5,0.5,0.5", "--verify-images", "0", "-o", f"{OUT}/x.onnx"), 2,
         r"int32|dtype", ("int32.safetensors", "mdl.py")),
    Case("export/--mean nan for a model trained elsewhere", "nonsense",
         ("export", "--model-def", f"{D}/mdl.py:build", "--weights", f"{D}/w.safetensors", "--input-size", "32",
          "--mean", "nan,0.5,0.5", "--std", "0.5,0.5,0.5", "--verify-images", "0", "-o", f"{OUT}/x.onnx"), 2,
         "mean", ("mdl.py",)),
    Case("export/--input-size 0 for a model trained elsewhere", "nonsense",
         ("export", "--model-def", f"{D}/mdl.py:build", "--weights", f"{D}/w.safetensors", "--input-size", "0",
          "--mean", "0.5,0.5,0.5", "--std", "0.5,0.5,0.5", "--verify-images", "0", "-o", f"{OUT}/x.onnx"), 2,
         "input.size", ("mdl.py",)),
]  # fmt: skip

# ---------------------------------------------------------------- readers: what users hand us (issue 35)

EVAL_PRE = ("eval", f"{D}/theirs.onnx", "--data", f"{D}/imgs", "--preprocess")
QUANTIZE_ON = ("-o", f"{OUT}/q.onnx", "--calib", f"{D}/calib.npy", *QOPTS)
REGEX = ("quantize", f"{D}/m.onnx", *QUANTIZE_ON)
NO_FLAG = r"^(?!.*--{}\b)"  # the line names no such flag (the value came from a file, not from it)
NOT_ELSEWHERE = r"^(?!.*aft-export [a-z/-]+ --)"  # no other command's flags


def _readers() -> list[Case]:
    R = "readers"
    pre = [  # --preprocess FILE: each value named by the file and its key, never as a flag
        ("input_size 1e400", "pre_inf.json", NO_FLAG.format("input-size") + r".*pre_inf\.json: input_size must be"),
        ("input_size null", "pre_null.json", r"pre_null\.json: input_size must be .*got null"),
        ("input_size 0", "pre_size0.json", NO_FLAG.format("input-size") + r".*pre_size0\.json: input_size must"),
        ("std negative", "pre_std.json", NO_FLAG.format("std") + r".*pre_std\.json: std must be .*> 0"),
        ("nested 5000 deep", "pre_deep.json", r"pre_deep\.json nests lists or mappings more than \d+ deep"),
        ("classes_file a number", "pre_cfnum.json", r"pre_cfnum\.json: classes_file must be text"),
        ("classes_file a directory", "pre_cfdir.json",
         NO_FLAG.format("classes") + r".*names is a directory; correct classes_file in .*pre_cfdir\.json"),
        ("Latin-1, not UTF-8", "pre_latin1.json", r"pre_latin1\.json is not UTF-8 text \(byte 0xe9"),
        ("YAML yes/no as class names", "pre_yes.yaml", r"classes must be a list of non-empty names .*quote it"),
        ("YAML aliases a billion values", "bomb.yaml", r"bomb\.yaml holds more than [\d,]+ values"),
        ("9 MiB", "pre_huge.json", r"pre_huge\.json is larger than the 8 MiB"),
    ]
    cases = [Case(f"eval/--preprocess {what}", R, (*EVAL_PRE, f"{D}/{name}"), 2, expect, ("theirs.onnx", name))
             for what, name, expect in pre]  # fmt: skip
    beside = {  # NAME.preprocess.json beside another tool's file, read by every command alike
        "eval": ("eval", "{f}", "--data", f"{D}/imgs"),
        "bench": ("bench", "{f}", "--iters", "1", "--warmup", "0", "--batch-size", "1"),
        "serve": ("serve", "{f}"),
        "triton-repo": ("triton-repo", "{f}", "-o", f"{OUT}/repo"),
    }
    for cmd, argv in beside.items():
        args = tuple(a.replace("{f}", f"{D}/theirs_latin1.onnx") for a in argv)
        cases.append(Case(f"{cmd}/NAME.preprocess.json in Latin-1", R, args, 2,
                          r"theirs_latin1\.preprocess\.json is not UTF-8 text", ("theirs_latin1",)))
    cases += [
        Case("info/NAME.preprocess.json in Latin-1", R, ("info", f"{D}/theirs_latin1.onnx"), 0,
             r"none given: .*theirs_latin1\.preprocess\.json is not UTF-8", ("theirs_latin1",)),
        # the JSON beside the file came from no flag: the advice is about that file, not about --preprocess
        *[Case(f"{cmd}/NAME.preprocess.json a {kind}", R, argv, 2,
               rf"^error: preprocessing file .*/theirs_{stem}\.preprocess\.json {said}; correct or remove "
               rf"theirs_{stem}\.preprocess\.json beside theirs_{stem}\.onnx$", (f"theirs_{stem}",),
               base=stem != "fifo")  # a FIFO is read at the base commit: blocks forever
          for stem, kind, said in [("fifo", "FIFO", r"is a named pipe \(FIFO\), not a regular file"),
                                   ("dir", "directory", "is a directory")]
          for cmd, argv in [("eval", ("eval", f"{D}/theirs_{stem}.onnx", "--data", f"{D}/imgs")),
                            ("triton-repo", ("triton-repo", f"{D}/theirs_{stem}.onnx", "-o", f"{OUT}/repo"))]],
        # metadata values in an ONNX file (ours)
        Case("quantize/metadata input_size 1e400", R, ("quantize", f"{D}/meta_inf.onnx", *QUANTIZE_ON), 2,
             r"metadata: input_size must be a list of whole numbers .*got \[3, Infinity", ("meta_inf.onnx",)),
        Case("info/metadata nested 5000 deep", R, ("info", f"{D}/meta_deep.onnx"), 3, r"malformed, not shown: mean",
             ("meta_deep.onnx",)),
        Case("info/quantization recipe nested 5000 deep", R, ("info", f"{D}/meta_deep_recipe.onnx"), 0,
             r"malformed quantization metadata \(quantization nests", ("meta_deep_recipe.onnx",)),
        *[Case(f"{cmd}/metadata nested 5000 deep", R, argv, 2, r"malformed aft-export metadata \(mean nests",
               ("meta_deep.onnx",)) for cmd, argv in [
            ("infer", ("infer", f"{D}/meta_deep.onnx", f"{D}/imgs/k0/0.png")),
            ("serve", ("serve", f"{D}/meta_deep.onnx")),
            ("triton-repo", ("triton-repo", f"{D}/meta_deep.onnx", "-o", f"{OUT}/repo"))]],
        # engine manifests: info shows the entry as malformed and goes on; a command that needs it stops
        Case("info/manifest whose model is a list", R, ("info", f"{D}/e_model_list.engine"), 3,
             r"manifest +malformed, not shown: model", ("e_model_list.engine",)),
        Case("info/manifest whose network is text", R, ("info", f"{D}/e_network_text.engine"), 3,
             r"manifest +malformed, not shown: network", ("e_network_text.engine",)),
        Case("info/manifest whose network.compute is a list", R, ("info", f"{D}/e_compute_list.engine"), 3,
             r"manifest +malformed, not shown: network", ("e_compute_list.engine",)),
        # (a command that runs the engine gets that far only with its TensorRT: tests/test_trt.py checks it there)
        Case("triton-repo/manifest whose input is {\"min\": 5}", R,
             ("triton-repo", f"{D}/e_input_min5.engine", "-o", f"{OUT}/repo"), 2, r"manifest of .*malformed input",
             ("e_input_min5.engine",)),
        # what the engine is for (its deploy row) from a manifest whose library and targets are of the wrong type;
        # --backend onnxruntime: the engine is not run on any machine, so the outcome is the same on each
        Case("bench/--reference with a manifest whose library is a list", R,
             ("bench", f"{D}/m.onnx", f"{D}/e_library_list.engine", "--reference", f"{D}/m.pt", "--backend",
              "onnxruntime", "--data", f"{D}/imgs", "--images", "4", "--batch-size", "1", "--iters", "1", "--warmup",
              "0"), 0, r"e_library_list\.engine +tensorrt +gpu .*skipped", ("e_library_list.engine",)),
        Case("info/manifest nested 5000 deep", R, ("info", f"{D}/e_deep.engine"), 3,
             r"unreadable \(nests lists or mappings", ("e_deep.engine",)),
        *[Case(f"{cmd}/manifest whose model is a list", R, argv, 2, r"manifest of .*malformed model",
               ("e_model_list.engine",)) for cmd, argv in [
            ("serve", ("serve", f"{D}/e_model_list.engine")),
            ("triton-repo", ("triton-repo", f"{D}/e_model_list.engine", "-o", f"{OUT}/repo"))]],
        # patterns: RE2, compiled once at option time, linear-time matching
        Case("quantize/--exclude-regex a{4294967295}", R, (*REGEX, "--exclude-regex", "a{4294967295}"), 2,
             r"--exclude-regex pattern 'a\{4294967295\}' repeats 4294967295 times, more than the 1000"),
        Case("quantize/--exclude-regex (((\\S+)+)+)+!", R, (*REGEX, "--exclude-regex", r"(((\S+)+)+)+!"), 2,
             r"--exclude-regex pattern .* matches no node", base=False),  # backtracks for hours at the base commit
        Case("quantize/--exclude-regex ''", R, (*REGEX, "--exclude-regex", ""), 2,
             r"--exclude-regex pattern '' is empty, and the empty pattern matches every node"),
        Case("quantize/--keep-fp32 ''", R, (*REGEX, "--keep-fp32", ""), 2, r"--keep-fp32 pattern '' is empty"),
        Case("quantize/--exclude-regex .*", R, (*REGEX, "--exclude-regex", ".*"), 2,
             r"--exclude-regex pattern '\.\*' matches every node of the graph"),
        Case("quantize/--keep-fp32 a lookahead", R, (*REGEX, "--keep-fp32", "(?=blocks)"), 2,
             r"--keep-fp32 pattern .* is not a regular expression RE2 takes"),
        Case("quantize/--exclude-regex (", R, (*REGEX, "--exclude-regex", "("), 2,
             r"--exclude-regex pattern '\(' is not a regular expression RE2 takes \(missing \)"),
        # what a file is, said first; advice in the running command's own flags
        *[Case(f"{cmd}/another tool's file, nothing beside it", R, argv, 2,
               NOT_ELSEWHERE + r".*theirs\.onnx has no aft-export metadata: it is another tool's fp32 graph, .*; "
                               r"write theirs\.preprocess\.json beside it", ("theirs.onnx",)) for cmd, argv in [
            ("triton-repo", ("triton-repo", f"{D}/theirs.onnx", "-o", f"{OUT}/repo")),
            ("infer", ("infer", f"{D}/theirs.onnx", f"{D}/imgs/k0/0.png"))]],
        Case("quantize/another tool's file, nothing beside it", R, ("quantize", f"{D}/theirs.onnx", *QUANTIZE_ON), 2,
             NO_FLAG.format("preprocess") + NO_FLAG.format("classes") + NOT_ELSEWHERE
             + r".*give --input-size, --mean and --std, or write theirs\.preprocess\.json beside it", ("theirs.onnx",)),
        Case("quantize/another tool's file, NAME.preprocess.json beside it", R,
             ("quantize", f"{D}/theirs_ok.onnx", *QUANTIZE_ON), 0, r"from theirs_ok\.preprocess\.json",
             ("theirs_ok",), creates=("out/q.onnx",)),
        Case("quantize/ONNX Runtime's int8 (QOperator)", R, ("quantize", f"{D}/ortq.onnx", *QUANTIZE_ON), 2,
             r"ortq\.onnx is already quantised to int8 \(QOperator form: ConvInteger, DynamicQuantizeLinear", ("ortq.onnx",)),
        Case("quantize/another tool's int8 (QDQ)", R, ("quantize", f"{D}/theirs_qdq.onnx", *QUANTIZE_ON), 2,
             r"is already quantised to int8 \(QDQ form: QuantizeLinear, DequantizeLinear\)", ("theirs_qdq",)),
        Case("info/ONNX Runtime's int8 (QOperator)", R, ("info", f"{D}/ortq.onnx"), 0,
             r"(?s)precision +int8 .*another tool .*: int8 graph, already quantised \(QOperator form", ("ortq.onnx",)),
        # which row of limits applies: fp32's max_abs 1e-4 fails it (it differs by ~6e-4), int8's passes it;
        # top-1 is left out, the world's model being random weights whose near ties may flip on another CPU
        Case("parity/ONNX Runtime's int8 judged with int8's limits", R,
             ("parity", f"{D}/m.pt", f"{D}/ortq.onnx", "--data", f"{D}/imgs", "--images", "4", "--tolerance",
              "int8.min_top1_agreement=0"), 0,
             r"ortq\.onnx +onnxruntime +int8 .*PASS", ("ortq.onnx",)),
        *[Case(f"{cmd}/another tool's graph of two inputs", R, argv, 2,
               NO_FLAG.format("input-size") + r".*another tool's fp32 graph that takes 2 inputs .*no preprocessing "
                                              r"changes what a graph takes", ("theirs_two",)) for cmd, argv in [
            ("eval", ("eval", f"{D}/theirs_two.onnx", "--data", f"{D}/imgs", "--input-size", "32")),
            ("quantize", ("quantize", f"{D}/theirs_two.onnx", *QUANTIZE_ON))]],
        Case("eval/another tool's graph of an int64 input", R, ("eval", f"{D}/theirs_int64.onnx", "--data", f"{D}/imgs"),
             2, r"that takes int64 of shape .* as its input 'image', not a float32 \(N, C, H, W\) image batch", ("theirs_int64",)),
        *[Case(f"{cmd}/a FIFO as the model", R, argv, 2, r"fifo_model\.onnx is a named pipe \(FIFO\)",
               ("fifo_model.onnx",)) for cmd, argv in [
            ("quantize", ("quantize", f"{D}/fifo_model.onnx", *QUANTIZE_ON)),
            ("info", ("info", f"{D}/fifo_model.onnx")),
            ("triton-repo", ("triton-repo", f"{D}/fifo_model.onnx", "-o", f"{OUT}/repo"))]],
        *[Case(f"{cmd}/a FIFO as the {what}", R, argv, 2,
               rf"^error: {what} .*/fifo_model\.{ext} is a named pipe \(FIFO\), not a regular file; check the path$",
               (f"fifo_model.{ext}",), base=False) for cmd, what, ext, argv in [  # said "does not exist" there
            ("bench", "engine", "engine", ("bench", f"{D}/fifo_model.engine", "--iters", "1", "--warmup", "0")),
            ("triton-repo", "artifact", "engine", ("triton-repo", f"{D}/fifo_model.engine", "-o", f"{OUT}/repo")),
            ("info", "checkpoint", "pt", ("info", f"{D}/fifo_model.pt"))]],
    ]  # fmt: skip
    return cases


# ---------------------------------------------------------------- files that point elsewhere (issue 43)

DEEP = f"{D}/p1/p2/p3/p4/p5/trav.onnx"  # tests/hostile/world.py DEEP_MODEL
OUTSIDE = r"keeps its data in '.*', outside the folder of the file that names it; keep the data files in the model's folder"
REFERENCE = ("--data", f"{D}/imgs", "--images", "4", "--batch-size", "1", "--iters", "1", "--warmup", "0")


def _elsewhere() -> list[Case]:
    """Paths inside a file are contained; the deploy table checks what it is given; the messages of
    issue 43, each in one line naming the real cause. The harness checks that the file it plants
    outside the case directory keeps its size, time and bytes."""
    repo = ("-o", f"{OUT}/repo")
    cases = [
        # an ONNX file chose where triton-repo wrote: the victim above the case directory, overwritten
        Case("triton-repo/external data that escapes onto a file outside", "destroys", ("triton-repo", DEEP, *repo), 2,
             r"trav\.onnx: tensor .* " + OUTSIDE, ("trav.onnx",)),
        Case("triton-repo/external data that escapes to beside the repository", "destroys",
             ("triton-repo", f"{D}/q1/q2/q3/trav.onnx", *repo), 2, OUTSIDE, ("trav_beside.onnx",)),
        Case("triton-repo/a Constant node's external data that escapes", "destroys",
             ("triton-repo", DEEP, *repo), 2, OUTSIDE, ("trav_constant.onnx",)),
        Case("triton-repo/external data at an absolute path", "destroys", ("triton-repo", f"{D}/abs_data.onnx", *repo),
             2, r"keeps its data in '/.*victim\.bin', an absolute path", ("abs_data.onnx",)),
        Case("triton-repo/external data through a link to a file outside", "destroys",
             ("triton-repo", f"{D}/link_data.onnx", *repo), 2, r"'link_data\.bin', a link to .*, outside the folder",
             ("link_data.onnx",)),
        # shutil.SpecialFileError from the copy (portable file: copied as it is); blocks at the base commit
        Case("triton-repo/external data that is a FIFO", "crash",
             ("triton-repo", f"{D}/fifo_data.onnx", *repo, "--backend", "openvino"), 2,
             r"'fifo_data\.bin', which is a named pipe \(FIFO\), not a regular file", ("fifo_data.onnx",), base=False),
        Case("triton-repo/external data that is a directory", "files", ("triton-repo", f"{D}/dir_data.onnx", *repo), 2,
             r"'dir_data\.bin', which is a directory", ("dir_data.onnx",)),
        Case("triton-repo/external data that is missing", "files", ("triton-repo", f"{D}/missing_data.onnx", *repo),
             2, r"'missing_data\.bin', which does not exist in ", ("missing_data.onnx",)),
        Case("triton-repo/external data named model.onnx", "destroys",
             ("triton-repo", f"{D}/model_onnx_data.onnx", *repo), 2,
             r"'model\.onnx', the name of a file the output itself holds \(model\.onnx\); rename that file",
             ("model_onnx_data.onnx",)),
        Case("triton-repo/external data in a subfolder, named with ..", "readers",
             ("triton-repo", f"{D}/sub_data.onnx", *repo), 0, r"README", ("sub_data.onnx",),
             creates=("out/repo", "out/repo/*", "out/repo/*/*", "out/repo/*/*/*", "out/repo/*/*/*/*")),
        # every reader checks the same, before handing the file on
        *[Case(f"{cmd}/external data that escapes", "readers", argv, 2, OUTSIDE, ("trav.onnx",)) for cmd, argv in [
            ("info", ("info", DEEP)),
            ("check", ("check", DEEP)),
            ("build", ("build", DEEP, "-o", f"{OUT}/m.engine")),
            ("eval", ("eval", DEEP, "--data", f"{D}/imgs", "--backend", "openvino")),
            ("bench", ("bench", DEEP, "--reference", f"{D}/m.pt", "--backend", "openvino", *REFERENCE))]],
        # the deploy table checks its own inputs
        Case("bench/--reference with --batch-size 100000000", "cost",
             ("bench", f"{D}/m.onnx", "--reference", f"{D}/m.pt", *REFERENCE[:4], "--batch-size", "100000000"), 2,
             r"batch 100000000 of .* needs about .* available; use --batch-size \d+ or less", base=False),
        Case("bench/--reference with the same file twice", "exit",
             ("bench", f"{D}/m.onnx", f"{D}/m.onnx", "--reference", f"{D}/m.pt", "--backend", "onnxruntime",
              *REFERENCE), 0, r"(?s)Note: .*m\.onnx was given more than once: measured once\..*Deploy on the CPU"),
        Case("bench/--reference that is a plain state_dict", "exit",
             ("bench", f"{D}/m.onnx", "--reference", f"{D}/plain.pt", *REFERENCE), 2,
             r"^error: .*plain\.pt is a plain state_dict, which does not say its architecture, and a reference must; "
             r"give the aft-export checkpoint the files were exported from(?!.*--config)", ("plain.pt",)),
        Case("bench/--reference that the file was not made from", "exit",
             ("bench", f"{D}/m.onnx", "--reference", f"{D}/other.pt", *REFERENCE), 2,
             r"m\.onnx was exported from another checkpoint .*: it was not made from the reference .*other\.pt; give "
             r"the checkpoint it was made from as --reference", ("other.pt",)),
        Case("bench/--reference with --backend onnxruntime-tensorrt", "usage",
             ("bench", f"{D}/m.onnx", "--reference", f"{D}/m.pt", "--backend", "onnxruntime-tensorrt", *REFERENCE), 2,
             r"not a runtime the deploy table runs; with --reference choose onnxruntime, onnxruntime-cuda, openvino, "),
        # the tracebacks
        Case("quantize/--keep-fp32 with a byte that is not UTF-8", "crash", (*REGEX, "--keep-fp32", "node\udcff"), 2,
             r"--keep-fp32 pattern 'node\\xff' is not UTF-8 text"),
        # messages that name the real cause, in the command's own flags
        Case("triton-repo/a file name that makes a model name too long", "files",
             ("triton-repo", f"{D}/{'a' * 250}.onnx", *repo), 2,
             r"^error: the Triton model name is made from the file's name, .* 250 characters, more than the 249 a "
             r"model name may have .*; rename the file$", ("long_name.onnx",)),
        Case("quantize/--target tensorrt of a portable file", "nonsense",
             ("quantize", f"{D}/portable.onnx", "--target", "tensorrt", *QUANTIZE_ON), 2,
             r"portable\.onnx is an fp32 file of the portable target, which cannot be put in the tensorrt form",
             ("portable.onnx",)),
        *[Case(f"quantize/--precision fp16 {opt} {value}", "nonsense",
               ("quantize", f"{D}/m.onnx", "-o", f"{OUT}/q.onnx", "--precision", "fp16", opt, value), 2,
               rf"^error: {opt} is an int8 option .*; an fp16 graph has no int8 layers")
          for opt, value in (("--weight-bits", "7"), ("--method", "entropy"), ("--percentile", "99"),
                             ("--budget", "1"))],
        Case("eval/--backend openvino of a graph OpenVINO refuses", "crash",
             ("eval", f"{D}/ov_bad.onnx", "--data", f"{D}/imgs", "--backend", "openvino"), 2,
             r"OpenVINO cannot load .*ov_bad\.onnx: MatMul node \S+: Incompatible MatMul matrix dimension", ("ov_bad.onnx",)),
    ]  # fmt: skip
    return cases


# ---------------------------------------------------------------- click's own errors

USAGE = [
    Case("aft-export/unknown command", "usage", ("nosuchcmd",), 2, "no such command"),
    *[Case(f"{cmd}/unknown option", "usage", (*argv, "--bogus"), 2, "no such option") for cmd, argv in BASE.items()],
    Case("info/missing argument", "usage", ("info",), 2, "missing argument"),
    Case("info/extra argument", "usage", ("info", f"{D}/m.pt", "extra"), 2, "unexpected extra argument"),
    Case("models/extra argument", "usage", ("models", "extra"), 2, "unexpected extra argument"),
    Case("export/missing --output", "usage", ("export", f"{D}/m.pt"), 2, "missing option"),
    Case("quantize/missing --output", "usage", ("quantize", f"{D}/m.onnx", "--precision", "int8"), 2,
         "missing option"),
    Case("quantize/missing --precision", "usage", ("quantize", f"{D}/m.onnx", "-o", f"{OUT}/q.onnx"), 2,
         "missing option"),
    Case("train/missing --model", "usage", ("train", "--data", f"{D}/imgs", "--out", f"{OUT}/t.pt"), 2,
         "missing option"),
    Case("eval/missing --data", "usage", ("eval", f"{D}/m.onnx"), 2, "missing option"),
    Case("infer/missing image", "usage", ("infer", f"{D}/m.onnx"), 2, "missing argument"),
    Case("bench/missing artifact", "usage", ("bench",), 2, "missing argument"),
    Case("parity/missing checkpoint", "usage", ("parity",), 2, "missing argument"),
    Case("parity/no artifact", "exit", ("parity", f"{D}/m.pt", "--data", f"{D}/imgs"), 2, "artifact"),
    Case("check/no model", "usage", ("check",), 2, "onnx file"),
    Case("quantize/--precision int4", "usage", (*BASE["quantize"], "--precision", "int4"), 2, "--precision"),
    Case("quantize/--method foo", "usage", (*BASE["quantize"], "--method", "foo"), 2, "--method"),
    Case("parity/--provider gpu", "usage", (*BASE["parity"], "--provider", "gpu"), 2, "--provider"),
    Case("export/--op-form x", "usage", (*BASE["export"], "--op-form", "x"), 2, "--op-form"),
    Case("export/--target x", "usage", (*BASE["export"], "--target", "x"), 2, "--target"),
    Case("pipeline/--precision fp64", "usage", (*BASE["pipeline"], "--precision", "fp64"), 2, "--precision"),
    Case("build/--hardware-compatibility x", "usage", (*BASE["build"], "--hardware-compatibility", "x"), 2,
         "--hardware-compatibility"),
    Case("eval/--batch-size abc", "usage", (*BASE["eval"], "--batch-size", "abc"), 2, "--batch-size"),
    Case("infer/--top-k 1.5", "usage", (*BASE["infer"], "--top-k", "1.5"), 2, "--top-k"),
    Case("info/a directory as checkpoint", "usage", ("info", f"{D}/imgs"), 2, "directory"),
    Case("build/--output is a directory", "usage", ("build", f"{D}/m.onnx", "-o", f"{OUT}"), 2, "directory"),
]  # fmt: skip

# ---------------------------------------------------------------- the exit-code table

EXIT = [
    Case("export/--verify-images 0 is not verified", "exit",
         ("export", f"{D}/m.pt", "-o", f"{OUT}/x.onnx", "--verify-images", "0"), 3, "not verified",
         creates=("out/x.onnx",)),
    Case("bench/every artifact skipped", "exit", (*BASE["bench"], "--provider", "cuda"), 3, "skipped"),
    Case("parity/artifact skipped", "exit", (*BASE["parity"], "--provider", "cuda"), 3, "skipped"),
    Case("check/a version without rules", "exit", ("check", f"{D}/m.onnx", "--trt", "9.0"), 3, "no rules"),
    Case("check/a version that refuses", "exit", ("check", f"{D}/m.onnx", "--trt", "8.6"), 1, "refuse"),
    Case("parity/an artifact fails", "exit", (*BASE["parity"], "--tolerance", "fp32.max_abs=0"), 1, "FAIL"),
    Case("eval/ok", "exit", BASE["eval"], 0, r"top-1|top1"),
    Case("info/ok", "exit", BASE["info"], 0, "AFT-simple"),
    Case("models/ok", "exit", BASE["models"], 0, "aft_simple_test"),
    Case("infer/ok", "exit", BASE["infer"], 0, r"k\d"),
]  # fmt: skip


# ---------------------------------------------------------------- metadata that lies about the graph (issue 52)

LIES = r"liar_{0}\.onnx: its metadata says input_format {1}; its graph takes float32 \[N, 3, 32, 32\] normalised images"


def _lies() -> list[Case]:
    """A file's graph is the truth: metadata it contradicts is one line naming both on every command (``info``
    shows the file and exits 3); an unknown format is malformed metadata everywhere; the rest of issue 52."""
    u8, fl, ds = LIES.format("u8", "uint8-nhwc"), LIES.format("fl", "float-nchw"), LIES.format("ds", "float-nchw")
    repo = ("-o", f"{OUT}/repo")
    return [
        *[Case(f"{cmd}/metadata that says uint8-nhwc of a float graph", "readers", argv, 2, u8, ("liar_u8.onnx",))
          for cmd, argv in [
              ("triton-repo", ("triton-repo", f"{D}/liar_u8.onnx", *repo)),
              ("quantize", ("quantize", f"{D}/liar_u8.onnx", *QUANTIZE_ON)),
              ("eval", ("eval", f"{D}/liar_u8.onnx", "--data", f"{D}/imgs")),
              ("build", ("build", f"{D}/liar_u8.onnx", "-o", f"{OUT}/m.engine")),
              ("check", ("check", f"{D}/liar_u8.onnx"))]],
        *[Case(f"{cmd}/metadata that says float-nchw of a graph that does not normalise", "readers", argv, 2, fl,
               ("liar_fl.onnx",)) for cmd, argv in [
              ("infer", ("infer", f"{D}/liar_fl.onnx", f"{D}/imgs/k0/0.png")),  # "k3 36%", exit 0, at the base
              ("parity", ("parity", f"{D}/m.pt", f"{D}/liar_fl.onnx", "--data", f"{D}/imgs", "--images", "4")),
              ("bench", ("bench", f"{D}/liar_fl.onnx", "--reference", f"{D}/m.pt", "--backend", "onnxruntime",
                         *REFERENCE))]],
        Case("deepstream/a normal graph whose metadata claims the DeepStream form", "readers",
             ("deepstream", f"{D}/liar_ds.onnx", *repo), 2, ds, ("liar_ds.onnx",)),
        Case("info/metadata its graph contradicts", "readers", ("info", f"{D}/liar_u8.onnx"), 3,
             r"contradicted by the graph: .*" + u8, ("liar_u8.onnx",)),
        Case("info/metadata input_size its graph contradicts", "readers", ("info", f"{D}/meta_size.onnx"), 3,
             r"contradicted by the graph: .*says input_size \[3, 64, 64\]; its graph takes float32 \[N, 3, 32, 32\]",
             ("meta_size.onnx",)),
        Case("check/metadata input_size its graph contradicts", "readers", ("check", f"{D}/meta_size.onnx"), 2,
             r"meta_size\.onnx: its metadata says input_size \[3, 64, 64\]; its graph takes float32", ("meta_size.onnx",)),
        Case("info/an unknown input_format", "readers", ("info", f"{D}/liar_rgb565.onnx"), 3,
             r"(?s)malformed, not shown: input_format(?!.*rgb565 pixels)", ("liar_rgb565.onnx",)),
        *[Case(f"{cmd}/an unknown input_format", "readers", argv, 2,
               r"liar_rgb565\.onnx's metadata: input_format is \"rgb565\", not one of normalized, uint8-nhwc, "
               r"float-nchw", ("liar_rgb565.onnx",)) for cmd, argv in [
              ("infer", ("infer", f"{D}/liar_rgb565.onnx", f"{D}/imgs/k0/0.png")),
              ("triton-repo", ("triton-repo", f"{D}/liar_rgb565.onnx", *repo))]],
        # another tool's file that takes pixels: read from its graph, and what a user says of it held to it
        Case("info/another tool's uint8 file", "readers", ("info", f"{D}/theirs_u8.onnx"), 0,
             r"(?s)^(?!.*that its input).*from theirs_u8\.preprocess\.json\); it takes uint8-nhwc", ("theirs_u8",)),
        Case("infer/another tool's uint8 file", "readers", ("infer", f"{D}/theirs_u8.onnx", f"{D}/imgs/k0/0.png"), 0,
             r"k\d", ("theirs_u8",)),
        Case("eval/--input-format that another tool's graph contradicts", "readers",
             ("eval", f"{D}/theirs_u8.onnx", "--data", f"{D}/imgs", "--input-format", "float-nchw"), 2,
             r"theirs_u8\.onnx: its preprocessing \(.*\) says input_format float-nchw; its graph takes uint8 "
             r"\[N, 32, 32, 3\] raw pixels", ("theirs_u8",)),
        Case("infer/a preprocessing file whose classes_file holds a NUL", "readers",
             ("infer", f"{D}/theirs_nul.onnx", f"{D}/imgs/k0/0.png"), 2,
             r"theirs_nul\.preprocess\.json: classes_file is \"a\\u0000b\", which holds a NUL or a line break",
             ("theirs_nul",)),
        Case("infer/a preprocessing file whose class name holds a line break", "readers",
             ("infer", f"{D}/theirs_break.onnx", f"{D}/imgs/k0/0.png"), 2,
             r"theirs_break\.preprocess\.json: classes item 1, \"a\\nb\", holds a NUL or a line break",
             ("theirs_break",)),
        # the rest
        Case("quantize/a calibration array with a zero dimension", "crash",
             ("quantize", f"{D}/m.onnx", "-o", f"{OUT}/q.onnx", "--calib", f"{D}/zero_dim.npy", "--precision", "int8",
              "--images", "8"), 2, r"zero_dim\.npy: the array of shape \(8, 0, 32, 3\) holds no pixels",
             ("zero_dim.npy",)),
        *[Case(f"quantize/{flag} of a file that normalises its own pixels", "nonsense",
               ("quantize", f"{D}/u8.onnx", *QUANTIZE_ON, flag, value), 2,
               rf"^error: {flag} says how to normalise images, and .*u8\.onnx takes uint8-nhwc pixels that its first "
               r"nodes normalise .*; leave it out$", ("u8.onnx",))
          for flag, value in (("--mean", "0.5,0.5,0.5"), ("--std", "0.5,0.5,0.5"), ("--input-size", "32"))],
        Case("serve/a probability file, judged before the extras", "readers", ("serve", f"{D}/ds.onnx"), 2,
             r"ds\.onnx gives probabilities \(the DeepStream form\); Triton serves logits", ("ds.onnx",)),
        Case("quantize/--exclude with a line break", "nonsense", (*REGEX, "--exclude", "node\nkeys=1"), 2,
             r"--exclude takes non-empty text, or a list of them, got 'node\\nkeys=1' \(str\), a line break"),
    ]  # fmt: skip


# ---------------------------------------------------------------- DeepStream configs (issue 53)


def _deepstream() -> list[Case]:
    """Every value written into a config is checked against where it lands: a file name, the labels, the integers
    nvinfer reads as C ints, configs whose names collide; a file the release cannot read; options that mean nothing."""
    ds = ("deepstream", f"{D}/ds.onnx", "-o", f"{OUT}/ds")
    return [
        Case("deepstream/a file name with a line break", "destroys",
             ("deepstream", f"{D}/a\nbatch-size=9.deepstream.onnx", "-o", f"{OUT}/ds"), 2,
             r"holds a line break, a tab, a backslash, a NUL, .* which a DeepStream config's value cannot hold",
             ("ds_break",)),
        Case("deepstream/one name in two folders", "destroys", ("deepstream", f"{D}/x/ds.onnx", f"{D}/y/ds.onnx", "-o",
                                                                  f"{OUT}/ds"), 2,
             r"x/ds\.onnx and .*y/ds\.onnx would both be written as config_infer_ds\.txt", ("ds_twins",)),
        Case("deepstream/--batch-size 99999999999", "nonsense", (*ds, "--batch-size", "99999999999"), 2,
             r"--batch-size", ("ds.onnx",)),
        Case("deepstream/metadata naming 3 classes for 10 probabilities", "readers",
             ("deepstream", f"{D}/ds_3classes.onnx", "-o", f"{OUT}/ds"), 2,
             r"ds_3classes\.onnx's metadata names 3 classes but its graph gives 10 probabilities", ("ds_3classes.onnx",)),
        Case("deepstream/the portable target's int8 file", "readers",
             ("deepstream", f"{D}/ds_portable_int8.onnx", "-o", f"{OUT}/ds"), 2,
             r"is the portable target's int8 file, made for CPUs", ("ds_portable_int8.onnx",)),
        Case("deepstream/--release 6.3 of a TensorRT 10.3+ file", "nonsense", (*ds, "--release", "6.3"), 2,
             r"the TensorRT 8\.5\.2 of DeepStream 6\.3 \(JetPack 5\.1\.2\) does not read it .*--target tensorrt8",
             ("ds.onnx",)),
        Case("deepstream/object filters of a primary classifier", "nonsense", (*ds, "--operate-on-gie-id", "2"), 2,
             r"--operate-on-gie-id filter the objects a secondary classifier is given.*give --mode secondary",
             ("ds.onnx",)),
        Case("deepstream/--scaling-filter nicest on the GPU", "nonsense", (*ds, "--scaling-filter", "nicest"), 2,
             r"--scaling-filter nicest is VIC's .*give --scaling-hw vic", ("ds.onnx",)),
        Case("deepstream/--object-size without --data", "nonsense", (*ds, "--object-size", "77"), 2,
             r"--object-size sizes the labelled images of a measurement; give --data too", ("ds.onnx",)),
        Case("deepstream-check/a config that is no GKeyFile", "readers", ("deepstream-check", f"{D}/recipe.json"), 2,
             r"DeepStream config .*recipe\.json line 1 is not a \[group\] or a key=value line"),
        Case("deepstream-check/a directory of no configs", "files", ("deepstream-check", f"{D}/imgs"), 2,
             r"holds no DeepStream configs \(config_infer_\*\.txt\)"),
    ]  # fmt: skip


def all_cases() -> list[Case]:
    cases = (_nonsense() + _files() + _destroys() + CRASH + NONFINITE + USAGE + EXIT + _readers() + _elsewhere()
             + _lies() + _deepstream())
    ids = [c.id for c in cases]
    dup = {i for i in ids if ids.count(i) > 1}
    assert not dup, f"duplicate case ids: {sorted(dup)}"
    return cases
