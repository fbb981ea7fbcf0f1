"""The `llmcalc ui` command: the calculator as a local web page (llmcalc/ui), served until interrupted."""

from __future__ import annotations

import sys
from typing import Annotated

from llmcalc.cli.app import command
from llmcalc.cli.options import _opt
from llmcalc.errors import UserError

SERVER = "Server"
NEEDS = "llmcalc ui needs starlette and uvicorn: pip install 'llmcalc-cost[ui]'"


@command(rank=230, help=(
    "The calculator as a local web page: every view's figures are the commands' own, its state is in the URL, "
    "and each view shows its command line. Serves until Ctrl-C."))
def ui(
    host: Annotated[str, _opt(
        "--host", help="Address to listen on. The default is this machine only; another address lets anyone on "
        "that network use the page.", panel=SERVER, metavar="ADDR")] = "127.0.0.1",
    port: Annotated[int, _opt("--port", help="TCP port (1-65535).", panel=SERVER, metavar="N")] = 8000,
    open_page: Annotated[bool, _opt("--open", help="Open the page in the default browser once it is served.",
                                    panel=SERVER)] = False,
) -> None:
    try:
        import uvicorn

        from llmcalc.cli import page
        from llmcalc.ui.server import LOCAL_HOSTS, create_app
    except ImportError:
        raise UserError(NEEDS) from None
    if not 1 <= port <= 65535:
        raise UserError(f"`port` {port}: not a TCP port; give 1 to 65535, e.g. 8000")
    _check_free(host, port)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else shown}:{port}/"
    if host not in LOCAL_HOSTS:
        sys.stderr.write(f"warning: listening on {host}: anyone who can reach this machine on that network can use "
                         "the page (it reads no files and writes none)\n")
    sys.stderr.write(f"llmcalc ui: {url} (Ctrl-C stops it)\n")
    if open_page:
        import threading
        import webbrowser

        threading.Timer(0.5, webbrowser.open, (url,)).start()
    uvicorn.run(create_app(page, host), host=host, port=port, log_level="warning")


def _check_free(host: str, port: int) -> None:
    """Refuse, in one line, an address that cannot be listened on (in use, not this machine's) before serving."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        raise UserError(f"`host` {host}: not an address of this machine; give 127.0.0.1 or an address it has") \
            from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(address)
        except OSError as e:
            import errno

            if e.errno == errno.EADDRNOTAVAIL:
                raise UserError(f"`host` {host}: not an address of this machine; give 127.0.0.1 or an address it "
                                "has") from None
            raise UserError(f"`host` {host} `port` {port}: cannot listen there ({e.strerror}); give another "
                            "`port`, or stop what uses it") from None
