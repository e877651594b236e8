"""Every setting, once: a frozen dataclass per group.

The traced child imports this module (the engine reads :class:`FindingsConfig`): it
imports nothing but the schema's helpers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shapelens.settings.schema import described, setting

HINT_FORMATS = ("compact", "full")
DIM_NAMES = ("off", "names", "both")
BACKENDS = ("auto", "settrace", "monitoring")


@dataclass(frozen=True, kw_only=True)
class FindingsConfig:
    """Which findings the engine looks for, and what its NaN/Inf scan may cost."""

    broadcast: bool = setting(
        True,
        flag="--no-findings",
        key="findings.broadcast",
        help="Warn where an elementwise op silently broadcasts to a larger shape, "
        "e.g. (4,) - (4,1) → (4,4).",
    )
    mismatch: bool = setting(
        True,
        flag="--no-findings",
        key="findings.mismatch",
        help="Explain device/dtype errors and point at where the odd tensor was born.",
    )
    nonfinite: bool = setting(
        True,
        flag="--no-findings",
        key="findings.nonfinite",
        help="Report the first line where a tensor holds NaN/Inf (CPU tensors, bounded cost).",
    )
    warnings: bool = setting(
        True,
        flag="--no-findings",
        key="findings.warnings",
        help='Show torch\'s own warnings ("target size ... different to the input size") at '
        "the line of your code that was running.",
    )
    degenerate: bool = setting(
        True,
        flag="--no-findings",
        key="findings.degenerate",
        help="Warn where a torch call does nothing useful: softmax over a dim of size 1, a "
        "keepdim reduction of size-1 dims, a squeeze() that also drops a batch of one.",
    )
    shape_comments: bool = setting(
        True,
        flag="--no-findings",
        key="findings.shapeComments",
        help="Check the shape comments in your code (`# (B, T, C)`, `# x: [N, D]`, "
        "`# (B, T) -> (B, T, V)`) against the shapes that ran, and say where one is stale.",
    )
    nonfinite_max_elements: int = setting(
        1_000_000,
        flag="--nonfinite-max-elements",
        metavar="N",
        key="nonfiniteMaxElements",
        vscode=False,
        positive=True,
        help="skip the NaN/Inf scan for tensors larger than this",
    )
    """The scan costs time proportional to a tensor's size."""
    nonfinite_on_gpu: bool = setting(
        False,
        flag="--nonfinite-on-gpu",
        key="nonfiniteOnGpu",
        vscode="findings.nonfiniteOnGpu",
        help="also scan GPU tensors for NaN/Inf (synchronises the device)",
        description="Also scan GPU tensors for NaN/Inf. This synchronises the device.",
    )


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """How the program runs: set on the command line and by the editor."""

    interpreter: str | None = setting(
        None,
        flag="--python",
        metavar="PATH",
        key="interpreter",
        help="interpreter that runs the script (default: this one)",
        description="Python interpreter that runs your code. Empty: the Python extension's "
        "selected interpreter, else python3 on PATH.",
        manifest={"type": "string", "default": ""},
    )
    extra_env: dict[str, str] = field(
        default_factory=dict,
        metadata=described(key="extraEnv", help="Extra environment variables for the traced run."),
    )
    timeout_s: float | None = setting(
        None,
        flag="--timeout",
        metavar="SECONDS",
        key="timeout",
        positive=True,
        help="stop the run after this long and keep what was collected",
        description="Stop a run after this many seconds and keep what was collected "
        "(null: no limit).",
    )
    keep_compile: bool = setting(
        False,
        flag="--compile",
        key="compile",
        vscode=False,
        help="keep torch.compile: compiled functions run compiled and their lines get no "
        "hints (default: they run eagerly, with hints)",
    )
    memory: bool = setting(
        False,
        flag="--memory",
        key="memory",
        help="also count a real run's tensor memory and FLOPs per line, module and device "
        "(a dispatch mode on every op: slower; a shape-only run always counts them)",
        description="Count a real run's tensor memory and FLOPs per line, module and "
        "device, as a shape-only run does (the hover's **memory**, the status bar's peak). "
        "It watches every torch op: the run is slower.",
    )
    gpu_memory: str | None = setting(
        None,
        flag="--gpu-memory",
        metavar="SIZE",
        key="gpuMemory",
        help="the simulated GPU's memory in a shape-only run (24GiB, 80GB): an out_of_memory "
        "finding where it runs out",
        description="A shape-only run's GPU memory (24GiB, 80GB): an out_of_memory finding "
        "marks the line where the simulated GPU would run out. Empty: no budget.",
        manifest={"type": "string", "default": ""},
    )
    gpu: str | None = setting(
        None,
        flag="--gpu",
        metavar="NAME",
        key="gpu",
        help="a shape-only run's GPU by name, for its memory (a100-80gb, h100-80gb, "
        "rtx-4090, ...: docs/cli.md lists them)",
        description="A shape-only run's GPU by name (a100-80gb, h100-80gb, rtx-4090, ...), "
        "for its memory budget when shapelens.gpuMemory is empty.",
        manifest={"type": "string", "default": ""},
    )
    scalars_on_gpu: bool = setting(
        False,
        flag="--scalars-on-gpu",
        key="scalarsOnGpu",
        help="also read 0-dim GPU tensors (a loss) for their course (synchronises the device)",
        description="Also read 0-dim GPU tensors (a loss) to draw their course as a "
        "sparkline. Each read synchronises the device.",
    )


@dataclass(frozen=True, kw_only=True)
class TracingOptions:
    """What the command line traces, and how (the editor sets these per run)."""

    functions: tuple[str, ...] = setting(
        (),
        flag="--function",
        metavar="NAME",
        help="trace only this function (myfunc, Block.forward); repeatable",
    )
    include: tuple[str, ...] = setting(
        (),
        flag="--include",
        metavar="GLOB",
        help="also treat matching files as user code; repeatable",
    )
    exclude: tuple[str, ...] = setting(
        (), flag="--exclude", metavar="GLOB", help="never trace matching files; repeatable"
    )
    backend: str = setting(
        "auto",
        flag="--backend",
        choices=BACKENDS,
        help="tracing mechanism (auto: sys.monitoring on Python 3.12+, else settrace)",
    )
    sample_hits: int | None = setting(
        None,
        flag="--sample",
        metavar="N",
        help="stop watching a line after N hits (counts become N+): with sys.monitoring (3.12+) "
        "or the 3.11 gate",
    )
    fake: bool = setting(
        False,
        flag="--fake",
        argument="fake",
        help="shape-only run on fake tensors: no data, any model size, CUDA simulated without "
        "a GPU; values the program reads (.item(), if on a tensor) are simulated",
    )
    stop_at_values: bool = setting(
        False,
        flag="--stop-at-values",
        argument="stopAtValues",
        help="a shape-only run stops at the first value the program reads (.item(), if on a "
        "tensor, printing one) instead of simulating it",
    )
    debug: bool = setting(
        False,
        flag="--debug",
        argument="debug",
        help="start debugpy on 127.0.0.1 and wait for a DAP client before running",
    )
    log: str | None = setting(
        None,
        flag="--log",
        const="-",
        metavar="FILE",
        help="also write the TorchSnooper-style log of the whole run (default: stderr)",
    )


@dataclass(frozen=True, kw_only=True)
class DistributedOptions:
    """A run under torchrun."""

    nproc_per_node: int | None = setting(
        None,
        flag="--nproc-per-node",
        metavar="N",
        argument="nprocPerNode",
        positive=True,
        help="run under torchrun with N processes, every rank traced, one merged trace",
    )
    collective_timeout_s: float = setting(
        60.0,
        flag="--collective-timeout",
        metavar="SECONDS",
        argument="collectiveTimeout",
        positive=True,
        help="a distributed run whose every rank has waited this long in a collective (or "
        "ended) is hung: stop it and say where each rank waited (default 60)",
    )
    torchrun_args: tuple[str, ...] = setting(
        (),
        flag="--torchrun-arg",
        metavar="ARG",
        help="extra torchrun option, e.g. --torchrun-arg=--max-restarts=0; repeatable",
    )


@dataclass(frozen=True, kw_only=True)
class RunCommand:
    """The language server's ``shapelens.run`` arguments that no other group declares
    (``fake``, ``debug`` and ``nprocPerNode`` are the run options of those names)."""

    uri: str | None = setting(
        None, argument="uri", required=True, help="The file to run (its results go there)."
    )
    function: str | None = setting(
        None, argument="function", help="Trace only this function (Block.forward)."
    )
    args: tuple[str, ...] = setting((), argument="args", help="The script's arguments.")
    cwd: str | None = setting(
        None,
        argument="cwd",
        help="Working directory (default: the workspace folder holding the file).",
    )
    module: str | None = setting(
        None,
        argument="module",
        help="Run this module (python -m) instead of the file; the file owns the results.",
    )
    env: dict[str, str] = field(
        default_factory=dict,
        metadata=described(
            argument="env",
            help="Variables set for this run, over the server's environment and "
            "shapelens.extraEnv.",
        ),
    )
    progress: bool = setting(
        True,
        argument="progress",
        help="Report progress (false when the client shows its own, as the extension does).",
    )
    client_attaches: bool = setting(
        False,
        argument="clientAttaches",
        help="With debug: the client attaches on shapelens/debugListening itself.",
    )


@dataclass(frozen=True, kw_only=True)
class HintSettings:
    """What a hint says, in the listing and in the editor."""

    hint_format: str = setting(
        "compact",
        flag="--hints",
        key="hintFormat",
        choices=HINT_FORMATS,
        help="compact: dtype, device, grad and counts only where they are news (default); "
        "full: everything on every line",
        description="How much each hint says.",
        choice_help=(
            "The shape always; dtype, device and grad only where they are news (not the run's "
            "usual ones, not what the line read); hit counts only where they differ from the "
            "enclosing def or loop; equal shapes of one line merged (q k v (4,64,64)). Hover "
            "has the rest.",
            "Everything on every value: pred (4,1) f32 cpu grad ×10.",
        ),
    )
    dim_names: str = setting(
        "off",
        flag="--dim-names",
        key="dimNames",
        choices=DIM_NAMES,
        help="name a hint's dims after the variables that built them: off (default), names: "
        "k (B,n_head,T,16), both: k (B=2,n_head=4,T=8,16); sizes where no name did",
        description="Name the dims of a hint's shape after the variables that built them "
        "(B, T, C = x.size(), self.n_head). Hover always names them.",
        choice_help=(
            "Sizes only: k (2,4,8,16).",
            "Names where the run bound them, sizes elsewhere: k (B,n_head,T,16).",
            "Names and sizes: k (B=2,n_head=4,T=8,16).",
        ),
    )
    coverage: bool = setting(
        False,
        flag="--coverage",
        key="coverage",
        help="also show how often lines that bound no value ran",
        description="Also show how often lines that bound no tensor or number ran (×21).",
    )
    max_hint_length: int = setting(
        43,
        key="maxHintLength",
        positive=True,
        help="Longest hint shown at the end of a line; longer ones end with …. Hover shows "
        "the rest.",
        manifest={"default": 80, "minimum": 10},
    )
    """A client that sends none: VS Code truncates inlay hints at 43 characters by default."""


@dataclass(frozen=True, kw_only=True)
class ListingOptions:
    """What the command line prints and writes after the run."""

    json: str | None = setting(
        None, flag="--json", metavar="PATH", help="write the trace (shapelens.trace/2) here"
    )
    quiet: bool = setting(False, flag="--quiet", short="-q", help="do not print the listing")
    modules: bool = setting(
        False,
        flag="--modules",
        help="after the run, print every nn.Module that ran as a tree: class, parameters, "
        "input → output shapes, calls",
    )
    color: bool | None = setting(
        None, flag="--color", help="colour the listing even when stderr is not a terminal"
    )
    """``None``: colour when stderr is a terminal that wants it; ``--no-color``: never."""


@dataclass(frozen=True, kw_only=True)
class NotebookSettings:
    """Traces that Jupyter kernels write, read by the language server."""

    trace_dir: str | None = setting(
        None,
        key="traceDir",
        help="One more folder where Jupyter kernels traced with `%load_ext shapelens` write "
        "their traces (kernel-*.json), relative to each workspace folder unless absolute. The "
        ".shapelens folder of every workspace folder and of every open notebook's folder, "
        "and $SHAPELENS_TRACE_DIR, are always read.",
        manifest={"type": "string", "default": ""},
    )


@dataclass(frozen=True, kw_only=True)
class ExtensionSettings:
    """Read by the VS Code extension alone: here so that its manifest has one source."""

    display_mode: str = setting(
        "decorations",
        key="displayMode",
        choices=("decorations", "inlayHints"),
        help="How per-line tensor hints are shown.",
        choice_help=(
            "Greyed text at the end of each traced line (error-lens style).",
            "The language server's standard inlay hints.",
        ),
    )
    extra_args: tuple[str, ...] = setting(
        (), key="extraArgs", help="Arguments passed to the script (sys.argv[1:])."
    )
    server_interpreter: str = setting(
        "",
        key="serverInterpreter",
        help="Python 3.11+ that runs ShapeLens's language server. Empty: the interpreter "
        "that runs your code (shapelens.interpreter). Set it when that one is Python 3.10: "
        "your code keeps running there.",
    )
