"""The ``shapelens`` command: ``shapelens run [options] SCRIPT|-m MODULE [ARGS...]``, and
``merge``, ``lsp`` and ``doctor``."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence

from shapelens import __version__
from shapelens.cli.doctor import add_doctor, doctor
from shapelens.present.labels import HintStyle
from shapelens.present.listing import render_listing
from shapelens.present.modules import modules_table
from shapelens.runner.contract import RunRequest
from shapelens.runner.launcher import RunResult, UsageError, run_traced
from shapelens.runner.warm import named_fork_server
from shapelens.settings.cli import add_flags, read_flags
from shapelens.settings.gpu_budget import BudgetError
from shapelens.settings.groups import (
    DistributedOptions,
    FindingsConfig,
    HintSettings,
    ListingOptions,
    RunSettings,
    TracingOptions,
)
from shapelens.settings.options import RunOptions
from shapelens.trace import Trace, write_trace

_RUN_FLAGS: tuple[tuple[str, type], ...] = (
    ("what to trace", TracingOptions),
    ("the run", RunSettings),
    ("findings", FindingsConfig),
    ("hints", HintSettings),
    ("output", ListingOptions),
    ("distributed", DistributedOptions),
)
"""The schema's groups that ``shapelens run`` takes flags for, under these headings."""


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
    for title, group in _RUN_FLAGS:
        add_flags(run, group, title)
    run.add_argument("script", nargs=argparse.REMAINDER, metavar="SCRIPT [ARGS...]")
    _add_merge(
        commands.add_parser(
            "merge", help="merge the per-rank traces of a distributed run (SHAPELENS_TRACE_DIR)"
        )
    )
    _add_lsp(commands.add_parser("lsp", help="start the language server (stdio by default)"))
    add_doctor(
        commands.add_parser(
            "doctor", help="the interpreter, torch and tracing core a run would use (bug reports)"
        )
    )
    return parser


def _add_merge(merge: argparse.ArgumentParser) -> None:
    merge.add_argument("directory", help="folder holding the rank files (SHAPELENS_TRACE_DIR)")
    merge.add_argument("-o", "--output", required=True, metavar="PATH", help="merged trace")
    merge.add_argument(
        "--run",
        action="append",
        default=[],
        metavar="ID",
        help="merge this run (needed when the folder holds several); repeatable",
    )


def _add_lsp(lsp: argparse.ArgumentParser) -> None:
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    options = parser.parse_args(argv)
    if options.command == "run":
        return _run(parser, options)
    if options.command == "lsp":
        return _lsp(parser, options)
    if options.command == "merge":
        return _merge(options)
    if options.command == "doctor":
        return doctor(options)
    parser.print_help(sys.stderr)
    return 2


def _run(parser: argparse.ArgumentParser, options: argparse.Namespace) -> int:
    request = _request(parser, options)
    if request is None:
        return 2
    distributed = read_flags(DistributedOptions, options)
    if distributed.nproc_per_node is not None and distributed.nproc_per_node < 1:
        parser.error("--nproc-per-node must be at least 1")
    try:
        result = _traced(request, distributed)
    except UsageError as err:
        print(f"shapelens: {err}", file=sys.stderr)
        return 2
    if result.error is not None:
        print(f"shapelens: {result.error}", file=sys.stderr)
        return 2
    listing = read_flags(ListingOptions, options)
    return _report(result.trace, listing, read_flags(HintSettings, options))


def _request(parser: argparse.ArgumentParser, options: argparse.Namespace) -> RunRequest | None:
    """The run the flags ask for; ``None`` (said on stderr) when its log cannot be written."""
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
            return None
    run_options = RunOptions(
        tracing=read_flags(TracingOptions, options),
        run=read_flags(RunSettings, options),
        findings=read_flags(FindingsConfig, options),
    )
    try:
        return RunRequest.for_options(target=target, args=args, module=module, options=run_options)
    except BudgetError as err:
        parser.error(str(err))


def _traced(request: RunRequest, distributed: DistributedOptions) -> RunResult:
    # Ctrl-C reaches the child (same process group); we wait for it to finish its way.
    # torchrun runs in its own session: run_distributed passes it on. A handler, not
    # SIG_IGN: an ignored SIGINT is inherited through exec and the script would ignore it too.
    # A child forked by a fork server is in a session of its own: the signal is passed on.
    interrupt = threading.Event()
    warm = named_fork_server()

    def on_interrupt(*_: object) -> None:
        interrupt.set()
        if warm is not None:
            warm.interrupt()

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        if distributed.nproc_per_node is not None:
            from shapelens.runner.distributed import run_distributed

            return run_distributed(
                request,
                distributed.nproc_per_node,
                distributed.torchrun_args,
                collective_timeout_s=distributed.collective_timeout_s,
                interrupt=interrupt,
            )
        return run_traced(request, on_debug=_announce_debugger, warm=warm)
    finally:
        signal.signal(signal.SIGINT, previous)


def _report(trace: Trace, listing: ListingOptions, hints: HintSettings) -> int:
    """Write and print what the flags ask for; the script's exit status (2: no write)."""
    if listing.json:
        try:
            write_trace(trace, listing.json)
        except OSError as err:
            print(f"shapelens: cannot write {listing.json}: {err.strerror}", file=sys.stderr)
            return 2
    if not listing.quiet:
        color = listing.color if listing.color is not None else _wants_color()
        style = HintStyle(
            format=hints.hint_format, coverage=hints.coverage, dim_names=hints.dim_names
        )
        sys.stderr.write(render_listing(trace, color=color, style=style))
    if listing.modules:
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
        ranks, ended, facts = read_rank_traces(directory, os.getcwd(), runs=options.run or runs)
    except UsageError as err:
        print(f"shapelens: {err}", file=sys.stderr)
        return 2
    write_trace(merge_traces(ranks, ended_at=ended, facts=facts), options.output)
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
