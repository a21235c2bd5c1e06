#!/usr/bin/env python3
"""A loopback smart-HTTP git server for the end-to-end tests (tests only, standard library only).

Serves the bare repositories under --root through `git http-backend` (CGI), over TLS when
--cert/--key are given, and lets a request through only with HTTP Basic auth whose password
equals the contents of --token-file (read on every request, so a test can change it) and whose
username equals --username when given. Everything else gets 401 with a Basic challenge, which is
what makes git ask its credential helpers.

Binds 127.0.0.1 on a free port, prints ``PORT=<n>`` as its first stdout line, appends one JSON
line per request to --log ({"method","path","user","auth":"none"|"ok"|"bad","status"}) and exits
when its stdin closes or on SIGTERM.

With --connect-proxy HOST:PORT, the port printed is instead that of an HTTP CONNECT proxy (also
on 127.0.0.1) that tunnels only to HOST:PORT, and always to the server above: git fetching
``https://chatgpt.com/repo.git`` through ``http.proxy`` sends its helpers exactly what a real
fetch sends (``host=chatgpt.com``, the default port) while every byte stays on loopback and no
name is looked up.
"""

import argparse
import base64
import hmac
import json
import os
import select
import signal
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 16 << 20
ARGS = None
LOG_LOCK = threading.Lock()


def log(entry):
    with LOG_LOCK, open(ARGS.log, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


class Handler(BaseHTTPRequestHandler):
    server_version = "e2e-git-http"

    def log_message(self, fmt, *args):  # quiet: the JSON log is the record
        pass

    def do_GET(self):
        self.handle_git()

    def do_POST(self):
        self.handle_git()

    def authorize(self):
        """Returns (state, user): state is "none", "ok" or "bad"."""
        header = self.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return "none", None
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode("utf-8").partition(":")
        except Exception:
            return "bad", None
        try:
            with open(ARGS.token_file, "r", encoding="utf-8") as f:
                expected = f.read().strip()
        except OSError:
            expected = ""
        ok = bool(expected) and hmac.compare_digest(password.encode(), expected.encode())
        if ARGS.username is not None and user != ARGS.username:
            ok = False
        return ("ok" if ok else "bad"), user

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(body)
                body += self.rfile.read(size)
                self.rfile.readline()
                if len(body) > MAX_BODY:
                    raise ValueError("body too large")
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ValueError("body too large")
        return self.rfile.read(length) if length else b""

    def handle_git(self):
        path, _, query = self.path.partition("?")
        state, user = self.authorize()
        entry = {"method": self.command, "path": path, "user": user, "auth": state}
        if state != "ok":
            entry["status"] = 401
            log(entry)
            body = b"authentication required\n"
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="e2e"')
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        body = self.read_body()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": ARGS.root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": ARGS.root,
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": user or "",
            "REMOTE_ADDR": self.client_address[0],
            "SERVER_PROTOCOL": "HTTP/1.0",
            "GATEWAY_INTERFACE": "CGI/1.1",
        }
        for name, value in self.headers.items():
            key = "HTTP_" + name.upper().replace("-", "_")
            if key not in ("HTTP_AUTHORIZATION", "HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"):
                env[key] = value
        proc = subprocess.run(["git", "http-backend"], input=body, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        out = proc.stdout
        split = out.find(b"\r\n\r\n")
        sep = 4
        if split < 0:
            split, sep = out.find(b"\n\n"), 2
        if split < 0:
            entry["status"] = 500
            log(entry)
            self.send_error(500, "bad CGI answer")
            return
        status, headers = 200, []
        for line in out[:split].decode("latin-1").replace("\r\n", "\n").split("\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split(" ")[0])
            elif name:
                headers.append((name, value.strip()))
        payload = out[split + sep:]
        entry["status"] = status
        log(entry)
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class ConnectProxy(socketserver.BaseRequestHandler):
    """CONNECT ARGS.connect_proxy -> 200, then bytes both ways to the git server; else 403."""

    def handle(self):
        conn = self.request
        conn.settimeout(30)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(4096)
            if not chunk or len(head) > 65536:
                return
            head += chunk
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        if request_line.split(" ")[:2] != ["CONNECT", ARGS.connect_proxy]:
            conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        upstream = socket.create_connection(("127.0.0.1", SERVER_PORT), timeout=30)
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        rest = head.split(b"\r\n\r\n", 1)[1]
        if rest:
            upstream.sendall(rest)
        try:
            while True:
                ready, _, _ = select.select([conn, upstream], [], [], 30)
                if not ready:
                    return
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    (upstream if s is conn else conn).sendall(data)
        finally:
            upstream.close()


SERVER_PORT = 0


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--token-file", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--username")
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--connect-proxy")
    ARGS = p.parse_args()
    global SERVER_PORT

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if ARGS.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ARGS.cert, ARGS.key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    SERVER_PORT = server.server_address[1]
    proxy = None
    if ARGS.connect_proxy:
        socketserver.ThreadingTCPServer.allow_reuse_address = True
        proxy = socketserver.ThreadingTCPServer(("127.0.0.1", 0), ConnectProxy)
        proxy.daemon_threads = True
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
    print("PORT=%d" % (proxy.server_address[1] if proxy else SERVER_PORT), flush=True)

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()
        if proxy:
            threading.Thread(target=proxy.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)

    def watch_stdin():
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except Exception:
            pass
        stop()

    threading.Thread(target=watch_stdin, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
