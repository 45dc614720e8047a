"""Archives in the real WMT layouts, built from text the tests choose, and an HTTP server on
127.0.0.1 that serves them with Range support and scripted failures."""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def make_tar(path: Path, members: dict[str, bytes], mode: str = "w:gz") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Server:
    """Serves `root` at http://127.0.0.1:PORT/. failures[path] = "cut": the first GET sends half
    the body then drops the connection; "lie": announces the full length but sends half, always;
    "cut-unannounced": the first GET sends no Content-Length and half the body, then closes."""

    def __init__(self, root: Path):
        self.root, self.failures, self.requests = root, {}, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                server.requests.append((self.path, self.headers.get("Range")))
                file = server.root / self.path.lstrip("/")
                if not file.is_file():
                    self.send_error(404)
                    return
                data = file.read_bytes()
                start = 0
                rng = self.headers.get("Range")
                if rng and rng.startswith("bytes="):
                    start = int(rng[6:].split("-")[0])
                    if start >= len(data):
                        self.send_response(416)
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                failure = server.failures.get(self.path)
                if failure == "cut-unannounced":
                    del server.failures[self.path]
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if failure == "cut":
                    del server.failures[self.path]
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(2)
                    return
                if failure == "lie":
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(2)
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
