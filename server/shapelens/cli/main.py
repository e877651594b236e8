"""The ``shapelens`` command: ``shapelens run [options] SCRIPT|-m MODULE [ARGS...]``."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence

from shapelens import __version__
from shapelens.engine.findings import FindingsConfig
from shapelens.present.labels import HINT_FORMATS, HintStyle
from shapelens.present.listing import render_listing
from shapelens.present.modules import modules_table
from shapelens.runner.contract import RunRequest
from shapelens.runner.launcher import UsageError, run_traced
from shapelens.trace import write_trace

FINDING_KINDS = ("broadcast", "mismatch", "nonfinite", "warnings")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """One clear line (plus the usage) and status 2, never a traceback."""
        self.print_usage(sys.stderr)
        self.exit(2, f"shapelens: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="shapelens", description="Per-line tensor shapes, dtypes and devices.")
    parser.add_argument("--version", action="version", version=f"shapelens {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    run = commands.add_parser(
        "run",
        help="run a script under the tracer",
        usage="shapelens run [options] (SCRIPT | -m MODULE) [ARGS...]",
    )
    run.add_argument(
        "-m",
        dest="module",
        nargs=argparse.REMAINDER,
        metavar="MODULE",
        help="run a module as `python -m MODULE` does (the rest goes to it)",
    )
    run.add_argument("--json", metavar="PATH", help="write the trace (shapelens.trace/2) here")
    run.add_argument(
        "--function",
        action="append",
        default=[],
        metavar="NAME",
        help="trace only this function (myfunc, Block.forward); repeatable",
    )
    run.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="GLOB",
        help="also treat matching files as user code; repeatable",
    )
    run.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="never trace matching files; repeatable",
    )
    run.add_argument(
        "--timeout",
        type=_positive_float,
        metavar="SECONDS",
        help="stop the run after this long and keep what was collected",
    )
    run.add_argument(
        "--python",
        default=sys.executable,
        metavar="PATH",
        help="interpreter that runs the script (default: this one)",
    )
    run.add_argument("--quiet", "-q", action="store_true", help="do not print the listing")
    run.add_argument(
        "--nproc-per-node",
        type=int,
        metavar="N",
        help="run under torchrun with N processes, every rank traced, one merged trace",
    )
    run.add_argument(
        "--torchrun-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra torchrun option, e.g. --torchrun-arg=--max-restarts=0; repeatable",
    )
    run.add_argument(
        "--backend",
        choices=("auto", "settrace", "monitoring"),
        default="auto",
        help="tracing mechanism (auto: sys.monitoring on Python 3.12+, else settrace)",
    )
    run.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="with sys.monitoring: stop watching a line after N hits (counts become N+)",
    )
    run.add_argument(
        "--compile",
        dest="keep_compile",
        action="store_true",
        help="keep torch.compile: compiled functions run compiled and their lines get no "
        "hints (default: they run eagerly, with hints)",
    )
    run.add_argument(
        "--log",
        nargs="?",
        const="-",
        metavar="FILE",
        help="also write the TorchSnooper-style log of the whole run (default: stderr)",
    )
    run.add_argument(
        "--debug",
        action="store_true",
        help="start debugpy on 127.0.0.1 and wait for a DAP client before running",
    )
    run.add_argument(
        "--hints",
        choices=HINT_FORMATS,
        default="compact",
        help="compact: dtype, device, grad and counts only where they are news (default); "
        "full: everything on every line",
    )
    run.add_argument(
        "--modules",
        action="store_true",
        help="after the run, print every nn.Module that ran as a tree: class, parameters, "
        "input → output shapes, calls",
    )
    run.add_argument(
        "--coverage",
        action="store_true",
        help="also show how often lines that bound no value ran",
    )
    color = run.add_mutually_exclusive_group()
    color.add_argument(
        "--color",
        dest="color",
        action="store_true",
        default=None,
        help="colour the listing even when stderr is not a terminal",
    )
    color.add_argument("--no-color", dest="color", action="store_false")
    run.add_argument(
        "--no-findings",
        action="append",
        default=[],
        choices=FINDING_KINDS,
        metavar="KIND",
        help=f"turn a finding off ({', '.join(FINDING_KINDS)})",
    )
    run.add_argument(
        "--nonfinite-max-elements",
        type=int,
        default=1_000_000,
        metavar="N",
        help="skip the NaN/Inf scan for tensors larger than this",
    )
    run.add_argument(
        "--nonfinite-on-gpu",
        action="store_true",
        help="also scan GPU tensors for NaN/Inf (synchronises the device)",
    )
    run.add_argument(
        "--scalars-on-gpu",
        action="store_true",
        help="also read 0-dim GPU tensors (a loss) for their course (synchronises the device)",
    )
    run.add_argument(
        "--fake",
        action="store_true",
        help="shape-only run on fake tensors: no data, any model size, CUDA simulated without "
        "a GPU; stops where the program needs a value (.item())",
    )
    run.add_argument("script", nargs=argparse.REMAINDER, metavar="SCRIPT [ARGS...]")
    merge = commands.add_parser(
        "merge", help="merge the per-rank traces of a distributed run (SHAPELENS_TRACE_DIR)"
    )
    merge.add_argument("directory", help="folder holding the rank files (SHAPELENS_TRACE_DIR)")
    merge.add_argument("-o", "--output", required=True, metavar="PATH", help="merged trace")
    merge.add_argument(
        "--run",
        action="append",
        default=[],
        metavar="ID",
        help="merge this run (needed when the folder holds several); repeatable",
    )
    lsp = commands.add_parser("lsp", help="start the language server (stdio by default)")
    transport = lsp.add_mutually_exclusive_group()
    transport.add_argument(
        "--tcp",
        action="store_true",
        help="listen on TCP (loopback); a peer must first send the token from --token-file",
    )
    transport.add_argument(
        "--socket", metavar="PATH", help="listen on a Unix socket only you can connect to (0600)"
    )
    transport.add_argument(
        "--connect",
        metavar="[HOST:]PORT",
        help="relay stdio to a `shapelens lsp --tcp` server, sending its token (for editors)",
    )
    lsp.add_argument("--host", default="127.0.0.1", help="loopback address to bind (--tcp)")
    lsp.add_argument(
        "--port", type=int, default=2087, help="port to listen on (--tcp; 0: any free one)"
    )
    lsp.add_argument(
        "--token-file",
        metavar="PATH",
        help="--tcp: where to write the token (mode 0600; default "
        "$XDG_RUNTIME_DIR/shapelens/lsp-PORT.token); --connect: where to read it",
    )
    return parser


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    options = parser.parse_args(argv)
    if options.command == "run":
        return _run(parser, options)
    if options.command == "lsp":
        return _lsp(parser, options)
    if options.command == "merge":
        return _merge(options)
    parser.print_help(sys.stderr)
    return 2


def _run(parser: argparse.ArgumentParser, options: argparse.Namespace) -> int:
    if (
        options.log is not None
        and not options.script
        and options.module is None
        and options.log.endswith(".py")
    ):
        # `--log train.py`: the optional FILE took the script; log to stderr instead.
        options.script, options.log = [options.log], "-"
    if options.module is not None:
        if not options.module:
            parser.error("-m needs a module name")
        target, args, module = options.module[0], tuple(options.module[1:]), True
    else:
        if not options.script:
            parser.error("missing SCRIPT (or -m MODULE)")
        target, args, module = options.script[0], tuple(options.script[1:]), False
        if target.startswith("-"):
            parser.error(f"unrecognized option {target!r} (options go before SCRIPT)")
    if options.log not in (None, "-"):
        try:  # pysnooper opens the log lazily, inside the traced program: check it now
            with open(options.log, "w", encoding="utf-8"):
                pass
        except OSError as err:
            print(f"shapelens: cannot write the log {options.log}: {err.strerror}", file=sys.stderr)
            return 2
    off = set(options.no_findings)
    request = RunRequest(
        target=target,
        args=args,
        module=module,
        python=options.python,
        include=tuple(options.include),
        exclude=tuple(options.exclude),
        functions=tuple(options.function),
        timeout_s=options.timeout,
        debug=options.debug,
        log=options.log,
        backend=options.backend,
        sample_hits=options.sample,
        keep_compile=options.keep_compile,
        scalars_on_gpu=options.scalars_on_gpu,
        fake=options.fake,
        findings=FindingsConfig(
            broadcast="broadcast" not in off,
            mismatch="mismatch" not in off,
            nonfinite="nonfinite" not in off,
            warnings="warnings" not in off,
            nonfinite_max_elements=options.nonfinite_max_elements,
            nonfinite_on_gpu=options.nonfinite_on_gpu,
        ),
    )
    if options.nproc_per_node is not None and options.nproc_per_node < 1:
        parser.error("--nproc-per-node must be at least 1")
    # Ctrl-C reaches the child (same process group); we wait for it to finish its way.
    # torchrun runs in its own session: run_distributed passes it on. A handler, not
    # SIG_IGN: an ignored SIGINT is inherited through exec and the script would ignore it too.
    interrupt = threading.Event()
    distributed = options.nproc_per_node is not None
    previous = signal.signal(signal.SIGINT, lambda *_: interrupt.set())
    try:
        if distributed:
            from shapelens.runner.distributed import run_distributed

            result = run_distributed(
                request, options.nproc_per_node, tuple(options.torchrun_arg), interrupt=interrupt
            )
        else:
            result = run_traced(request, on_debug=_announce_debugger)
    except UsageError as err:
        print(f"shapelens: {err}", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGINT, previous)
    trace = result.trace
    if result.error is not None:
        print(f"shapelens: {result.error}", file=sys.stderr)
        return 2
    if options.json:
        try:
            write_trace(trace, options.json)
        except OSError as err:
            print(f"shapelens: cannot write {options.json}: {err.strerror}", file=sys.stderr)
            return 2
    if not options.quiet:
        color = options.color if options.color is not None else _wants_color()
        style = HintStyle(format=options.hints, coverage=options.coverage)
        sys.stderr.write(render_listing(trace, color=color, style=style))
    if options.modules:
        table = modules_table(trace.modules) if trace.modules else "no nn.Module ran"
        sys.stderr.write(table + "\n")
    return trace.exit_code


def _merge(options: argparse.Namespace) -> int:
    from shapelens.runner.distributed import rank_files, read_rank_traces, runs_newest_first
    from shapelens.trace.merge import merge_traces

    directory = options.directory
    if not os.path.isdir(directory):
        print(f"shapelens: no such directory: {directory}", file=sys.stderr)
        return 2
    files = rank_files(directory)
    runs = runs_newest_first(files)
    unknown = [run for run in options.run if run not in runs]
    if not runs or unknown:
        missing = f"run {', '.join(unknown)}" if unknown else "shapelens rank files"
        print(f"shapelens: no {missing} in {directory}", file=sys.stderr)
        return 2
    if len(runs) > 1 and not options.run:  # never guess: nodes of one job may differ in id
        listing = [f"shapelens: {directory} holds {len(runs)} runs; choose with --run ID:"]
        for run in runs:  # newest first
            mine = [f for f in files if f.run == run]
            when = time.localtime(max(f.modified for f in mine))
            nodes = ",".join(str(n) for n in sorted({f.node for f in mine}))
            numbers = ",".join(str(r) for r in sorted(f.rank for f in mine))
            listing.append(
                f"  {run}  {time.strftime('%Y-%m-%d %H:%M:%S', when)}  node {nodes}  rank {numbers}"
            )
        print("\n".join(listing), file=sys.stderr)
        return 2
    try:
        ranks, ended = read_rank_traces(directory, os.getcwd(), runs=options.run or runs)
    except UsageError as err:
        print(f"shapelens: {err}", file=sys.stderr)
        return 2
    write_trace(merge_traces(ranks, ended_at=ended), options.output)
    print(f"shapelens: merged {len(ranks)} ranks into {options.output}", file=sys.stderr)
    return 0


def _announce_debugger(host: str, port: int) -> None:
    print(f"shapelens: debugpy listening on {host}:{port}; attach a DAP client", file=sys.stderr)
    sys.stderr.flush()


def _lsp(parser: argparse.ArgumentParser, options: argparse.Namespace) -> int:
    if options.tcp and options.host not in ("127.0.0.1", "::1", "localhost"):
        parser.error(f"--host must be a loopback address (got {options.host}): never expose it")
    if options.token_file and not (options.tcp or options.connect):
        parser.error("--token-file goes with --tcp or --connect")
    from pathlib import Path

    from shapelens.lsp import tcp  # pygls is only needed here
    from shapelens.lsp.server import create_server

    if not (options.tcp or options.socket or options.connect):
        create_server().start_io()
        return 0
    token_file = Path(options.token_file) if options.token_file else None
    try:
        if options.connect:
            try:
                host, port = tcp.parse_address(options.connect)
            except ValueError as err:
                parser.error(f"--connect: {err}")
            return tcp.bridge(host, port, tcp.bridge_token(port, token_file))
        if options.tcp:
            tcp.serve_tcp(create_server(), options.host, options.port, token_file)
        else:
            tcp.serve_unix(create_server(), Path(options.socket))
    except (tcp.TokenError, OSError) as err:  # no token, a taken port: say so, no traceback
        print(f"shapelens: {err}", file=sys.stderr)
        return 1
    return 0


def _wants_color() -> bool:
    return sys.stderr.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


if __name__ == "__main__":
    raise SystemExit(main())
