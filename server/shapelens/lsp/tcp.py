"""``shapelens lsp --tcp`` / ``--socket`` / ``--connect``: the server off stdio, for us only.

Any local user can connect to a loopback port (shared GPU login nodes), and a connected peer
runs code as us. So on TCP the first line a peer sends must be ``SHAPELENS-TOKEN <token>``;
the token (random, or ``$SHAPELENS_LSP_TOKEN``) is written to a file only we can read. Any
other first line gets one ``SHAPELENS-ERROR`` line and the connection is closed; the server
keeps listening. A Unix socket (``--socket``) needs no token: it is created 0600.
``--connect`` is the editor's side: a stdio bridge that sends the token, for editors that
cannot send it themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import secrets
import socket
import stat
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

from pygls.io_ import run_async
from pygls.lsp.server import LanguageServer

TOKEN_ENV = "SHAPELENS_LSP_TOKEN"
GREETING = b"SHAPELENS-TOKEN "
REFUSAL = b"SHAPELENS-ERROR "
MIN_TOKEN_LENGTH = 16
# A peer that connects and says nothing must not hold a connection open forever.
HANDSHAKE_TIMEOUT_S = 10.0

logger = logging.getLogger(__name__)

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class TokenError(Exception):
    """No usable token or token file (a message for the user)."""


def make_token() -> str:
    token = os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(32)
    check_token(token, f"${TOKEN_ENV}")
    return token


def check_token(token: str, origin: str) -> None:
    if len(token) < MIN_TOKEN_LENGTH or not token.isascii() or not token.isprintable():
        raise TokenError(
            f"{origin}: the token must be at least {MIN_TOKEN_LENGTH} printable ASCII characters"
        )
    if any(c.isspace() for c in token):
        raise TokenError(f"{origin}: the token must not contain spaces")


def default_token_file(port: int) -> Path:
    """``$XDG_RUNTIME_DIR/shapelens/lsp-PORT.token``, else the same under a per-user temp dir;
    predictable, so ``--connect`` finds it from the port alone."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        folder = Path(runtime) / "shapelens"
    else:
        folder = Path(tempfile.gettempdir()) / f"shapelens-{os.getuid()}"
    return folder / f"lsp-{port}.token"


def _private_folder(folder: Path) -> None:
    """Create ``folder`` 0700, or accept it only if it is ours and closed to others (in /tmp
    another user could have made it first, to read or swap what we put there)."""
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700, parents=True)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise TokenError(
            f"{folder} is not a folder only you can use: pass --token-file PATH elsewhere"
        )


def write_token_file(path: Path, token: str, *, private_folder: bool) -> None:
    """Write ``token`` to ``path``, mode 0600 from its first byte (a new file replaces the
    old one, so a pre-existing file or link there is never written through)."""
    if private_folder:
        _private_folder(path.parent)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".token-")  # 0600
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as file:
            file.write(token + "\n")
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def read_token_file(path: Path) -> str:
    try:
        token = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as err:
        raise TokenError(f"cannot read the token file {path}: {err}") from err
    check_token(token, str(path))
    return token


def _remove_token_file(path: Path, token: str) -> None:
    """Remove the file unless another server has written its own token there since."""
    with contextlib.suppress(OSError, TokenError):
        if read_token_file(path) == token:
            path.unlink()


# -- server ------------------------------------------------------------------------------------
async def _accepts(reader: asyncio.StreamReader, token: str) -> bool:
    try:
        line = await asyncio.wait_for(reader.readuntil(b"\n"), HANDSHAKE_TIMEOUT_S)
    except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
        return False
    # Constant time: how much of a guess matches must not show in how long the check takes.
    return hmac.compare_digest(line.rstrip(b"\r\n"), GREETING + token.encode("ascii"))


async def _refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, why: str) -> None:
    with contextlib.suppress(OSError, TimeoutError):
        writer.write(REFUSAL + why.encode() + b"\r\n")
        writer.write_eof()
        await writer.drain()
        # Read what the peer already sent before closing: closing a socket with unread data
        # resets the connection, and the peer may lose the line that says why.
        await asyncio.wait_for(_discard(reader), HANDSHAKE_TIMEOUT_S)
    writer.close()


async def _discard(reader: asyncio.StreamReader) -> None:
    while await reader.read(1 << 16):
        pass


def _serve(
    server: LanguageServer,
    listen: Callable[[Handler], Awaitable[asyncio.Server]],
    token: str | None,
    on_listening: Callable[[asyncio.Server], None],
) -> None:
    """Serve one client at a time on what ``listen`` opens; like pygls's ``start_tcp`` (its
    message loop and protocol), plus the token check and refusal of a second client."""
    server._stop_event = stop_event = threading.Event()
    busy = False

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal busy
        if token is not None and not await _accepts(reader, token):
            print("shapelens: refused a connection without the token", file=sys.stderr)
            await _refuse(
                reader,
                writer,
                "missing or wrong token: the first line must be 'SHAPELENS-TOKEN <token>'"
                " with the token from the file `shapelens lsp --tcp` wrote",
            )
            return
        if busy:
            await _refuse(reader, writer, "another client is connected to this server")
            return
        busy = True
        server.protocol.set_writer(writer)
        try:
            await run_async(
                stop_event=stop_event,
                reader=reader,
                protocol=server.protocol,
                logger=logger,
                error_handler=server.report_server_error,
            )
        finally:
            # As with stdio, the server lives as long as its client.
            server.shutdown()  # type: ignore[no-untyped-call]

    async def main() -> None:
        listening = await listen(connection)
        server._server = listening
        on_listening(listening)
        async with listening:
            await listening.serve_forever()

    with contextlib.suppress(asyncio.CancelledError, KeyboardInterrupt):
        asyncio.run(main())


def serve_tcp(server: LanguageServer, host: str, port: int, token_file: Path | None) -> None:
    """Listen on ``host:port`` (``port`` 0: any free one) for peers that send the token."""
    token = make_token()
    written: list[Path] = []

    def on_listening(listening: asyncio.Server) -> None:
        bound = int(listening.sockets[0].getsockname()[1])
        path = token_file or default_token_file(bound)
        write_token_file(path, token, private_folder=token_file is None)
        written.append(path)
        print(f"shapelens: listening on {host}:{bound}; token file: {path}", file=sys.stderr)
        sys.stderr.flush()

    try:
        _serve(
            server, lambda handler: asyncio.start_server(handler, host, port), token, on_listening
        )
    finally:
        for path in written:
            _remove_token_file(path, token)


def serve_unix(server: LanguageServer, path: Path) -> None:
    """Listen on a Unix socket only we can connect to (mode 0600 from its creation)."""

    async def listen(handler: Handler) -> asyncio.Server:
        previous = os.umask(0o177)  # bind() creates the socket file with these bits
        try:
            return await asyncio.start_unix_server(handler, path)
        finally:
            os.umask(previous)

    def on_listening(listening: asyncio.Server) -> None:
        print(f"shapelens: listening on {path}", file=sys.stderr)
        sys.stderr.flush()

    try:
        _serve(server, listen, None, on_listening)
    finally:
        with contextlib.suppress(OSError):
            path.unlink()


# -- editor side ---------------------------------------------------------------------------
def bridge(host: str, port: int, token: str) -> int:
    """Relay stdio (the editor) to ``host:port`` after sending the token."""
    try:
        connection = socket.create_connection((host, port))
    except OSError as err:
        print(f"shapelens: cannot connect to {host}:{port}: {err}", file=sys.stderr)
        return 1
    connection.sendall(GREETING + token.encode("ascii") + b"\r\n")

    def upstream() -> None:  # editor → server, until the editor closes our stdin
        with contextlib.suppress(OSError):
            while data := os.read(0, 1 << 16):
                connection.sendall(data)
        with contextlib.suppress(OSError):
            connection.shutdown(socket.SHUT_WR)

    threading.Thread(target=upstream, daemon=True).start()
    first = b""
    while len(first) < len(REFUSAL) and REFUSAL.startswith(first):  # could still be a refusal
        if not (data := _receive(connection)):
            break
        first += data
    if first.startswith(REFUSAL):
        while b"\n" not in first and (data := _receive(connection)):
            first += data
        reason = first[len(REFUSAL) :].split(b"\n")[0].decode(errors="replace").strip()
        print(f"shapelens: the server refused the connection: {reason}", file=sys.stderr)
        return 1
    out = sys.stdout.buffer
    data = first
    while data:
        out.write(data)
        out.flush()
        data = _receive(connection)
    return 0


def _receive(connection: socket.socket) -> bytes:
    try:
        return connection.recv(1 << 16)
    except OSError:
        return b""


def bridge_token(port: int, token_file: Path | None) -> str:
    """``--token-file``, else ``$SHAPELENS_LSP_TOKEN``, else the server's default file."""
    if token_file is None and os.environ.get(TOKEN_ENV):
        return make_token()
    return read_token_file(token_file or default_token_file(port))


def parse_address(text: str) -> tuple[str, int]:
    """``PORT``, ``HOST:PORT`` or ``[V6]:PORT`` (host defaults to 127.0.0.1)."""
    host, _, port = text.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected [HOST:]PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)
