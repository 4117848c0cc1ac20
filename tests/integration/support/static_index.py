"""A team's private index as many teams run one: a folder of wheels with ``simple/`` pages written once (as
``pip download`` plus ``dir2pi`` leave them), served by ``python -m http.server``.

Nothing a richer index adds is there: no ``#sha256=`` fragment on a link, no PEP 691 JSON, no PEP 658
``.metadata``, no PEP 700 upload time, no ``Range`` (the whole file is sent).  :func:`write_static_pages` writes
the pages, :func:`serve_folder` serves a folder with the standard library's own ``SimpleHTTPRequestHandler``.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.integration.support.wheels import project_of_wheel


def write_static_pages(root: Path) -> list[str]:
    """Write ``root/simple/index.html`` and ``root/simple/<project>/index.html`` for the wheels in
    ``root/files``; each link is ``../../files/<wheel>``, without a fragment (``data-yanked`` for a wheel with a
    ``<wheel>.yanked`` file beside it).  Returns the projects."""
    projects: dict[str, list[str]] = {}
    for wheel in sorted((root / "files").glob("*.whl")):
        projects.setdefault(project_of_wheel(wheel.name), []).append(wheel.name)
    for project, wheels in projects.items():
        files = root / "files"
        links = "".join(f'<a href="../../files/{html.escape(w)}"{_yanked(files / w)}>{html.escape(w)}</a><br>\n'
                        for w in wheels)
        page = root / "simple" / project / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"<html><head><title>Links for {project}</title></head><body>\n{links}</body></html>\n")
    links = "".join(f'<a href="{p}/">{p}</a><br>\n' for p in sorted(projects))
    (root / "simple" / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
    return sorted(projects)


def _yanked(wheel: Path) -> str:
    """The PEP 592 ``data-yanked`` attribute of ``wheel``'s link while ``<wheel>.yanked`` lies beside it (its text,
    stripped, is the reason), else nothing: a static page can carry it as PyPI's do."""
    marker = wheel.with_name(wheel.name + ".yanked")
    return f' data-yanked="{html.escape(marker.read_text().strip())}"' if marker.is_file() else ""


@dataclass
class StaticIndex:
    """A folder served over HTTP; ``url`` is its ``simple/`` index, ``requests`` every path asked for."""

    url: str
    root: Path
    requests: list[str] = field(default_factory=list)

    def downloads(self) -> list[str]:
        """The wheel files sent (by file name), in order."""
        return [p.rsplit("/", 1)[-1] for p in list(self.requests) if p.startswith("/files/")]


@contextmanager
def serve_folder(root: Path) -> Iterator[StaticIndex]:
    """Serve ``root`` on ``127.0.0.1`` as ``python -m http.server --directory ROOT`` does, for the block."""
    index = StaticIndex("", root)
    guard = threading.Lock()

    class Handler(SimpleHTTPRequestHandler):
        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            with guard:
                index.requests.append(self.path)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="static-index", daemon=True)
    thread.start()
    index.url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    try:
        yield index
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
