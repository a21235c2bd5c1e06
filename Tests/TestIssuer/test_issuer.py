#!/usr/bin/env python3
"""A loopback stand-in for the ChatGPT OAuth issuer (auth.openai.com), for tests only.

Python 3 standard library only. Binds 127.0.0.1 on a free port (or --port), prints
``PORT=<n>`` as its first stdout line, and exits when its stdin closes or on SIGTERM.

Wire endpoints (as the Codex CLI uses them):
  GET  /oauth/authorize                     scripted browser: 302 to redirect_uri?code=..&state=..
  POST /oauth/token                         authorization_code (PKCE S256) and refresh_token grants;
                                            refresh tokens rotate and are single-use, reuse is
                                            detected and invalidates the whole family
  POST /oauth/revoke                        revokes a refresh token's family
  POST /api/accounts/deviceauth/usercode    starts a device sign-in (404 when disabled)
  POST /api/accounts/deviceauth/token       pending until approve_after polls, then the code
ChatGPT backend (CHATGPT_CREDENTIAL_BACKEND=http://127.0.0.1:PORT/backend-api):
  GET  /backend-api/wham/usage              plan and rate-limit windows; 401 unless the bearer is
                                            the latest access token of a live family and
                                            ChatGPT-Account-Id is that family's account
Admin endpoints (tests only):
  GET  /__admin/stats    counters, see Issuer.stats()
  POST /__admin/config   merges settings, see DEFAULT_CONFIG (faults: a queue for refresh grants)
  POST /__admin/seed     creates a refresh-token family, returns a token set
  POST /__admin/reset    forgets all tokens, sessions, counters and settings

Everything is bounded: request bodies (1 MiB), every sleep (MAX_SLEEP), fault bodies (64 MiB).
"""

import argparse
import base64
import hashlib
import json
import os
import secrets
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
REGISTERED_BROWSER_REDIRECTS = (
    "http://localhost:1455/auth/callback",
    "http://localhost:1457/auth/callback",
)
MAX_REQUEST_BODY = 1 << 20
MAX_SLEEP = 120.0
MAX_HUGE = 64 << 20

DEFAULT_CONFIG = {
    "token_lifetime": 3600,          # access/id token lifetime, seconds
    "email": "user@example.com",
    "account_id": "acct-test-0001",
    "plan": "plus",
    "user_id": "user-test-0001",
    "approve_after": 2,              # device polls answered "pending" before approval
    "interval": 1,                   # device poll interval
    "interval_as_string": False,     # send interval as "1" instead of 1
    "device_disabled": False,        # 404 on /usercode
    "device_deny": False,            # answer polls with access_denied
    "device_expires_in": 900,        # device code lifetime, seconds
    "device_send_expires_in": False, # also tell the client that lifetime (expires_in) on /usercode
    "reuse_status": 401,             # status of a refresh_token_reused answer (400 also seen)
    "poison": None,                  # "esc" or "newline": access tokens carry ESC[2J or a newline
    "omit_in_refresh": [],           # fields left out of refresh answers, e.g. ["id_token"]
    "authorize_error": None,         # e.g. "access_denied": /authorize redirects with error=
    "refresh_delay": 0,              # seconds every refresh grant waits before answering
    "clock_offset": 0,               # seconds the issuer's clock is ahead of ours (iat/exp; negative: behind)
    "abandon_if_disconnected": False,  # after refresh_delay: a client that hung up is not rotated
    "exchange_faults": [],           # the same kind of queue for authorization_code exchanges
    "device_faults": [],             # and for device-token polls
    "faults": [],                    # queue for refresh grants, one entry consumed per request:
    #   {"status":500} {"status":429,"retry_after":2} {"status":401,"body":{...}} {"delay":5}
    #   {"html":true} {"huge":10485760} {"hang":true} {"drop_after_processing":true}
    #   {"redirect":"http://127.0.0.1:PORT/x","status":307} (Location answer, default status 302)
    # GET /backend-api/wham/usage:
    "usage_answer": "realistic",     # the body of an accepted request, one of USAGE_ANSWERS
    "usage_body": None,              # instead: this object (sent as JSON) or string (sent as is)
    "usage_faults": [],              # the same kind of queue as "faults", served before the token check
    "usage_fault_always": None,      # one fault served to every usage request, e.g. {"status":500}
}

# Bodies for "usage_answer". Times are relative to the request; {plan} is the family's plan.
USAGE_ANSWERS = ("realistic", "empty", "hostile_names", "huge_numbers", "nonsense_windows", "malformed", "not_object")


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def s256(verifier: str) -> str:
    return b64url(hashlib.sha256(verifier.encode("ascii")).digest())


def bounded_sleep(seconds, stop: threading.Event):
    try:
        seconds = float(seconds)
    except (TypeError, ValueError):
        return
    stop.wait(max(0.0, min(seconds, MAX_SLEEP)))


class Issuer:
    """All state, behind one lock. No method sleeps while holding it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.reset()

    def reset(self):
        self.config = json.loads(json.dumps(DEFAULT_CONFIG))
        self.auth_codes = {}       # code -> {challenge, redirect_uri, client_id, family_seed}
        self.devices = {}          # device_auth_id -> {user_code, polls, created, last_poll, ...}
        self.refresh_tokens = {}   # token -> {family, used, expired}
        self.families = {}         # family -> {active, active_access, invalidated, claims}
        self.access_tokens = {}    # access token -> family
        self.counters = {
            "requests": {},
            "refresh_requests": 0, "refresh_success": 0, "refresh_reused": 0,
            "refresh_invalidated": 0, "refresh_expired": 0, "refresh_unknown": 0,
            "faults_served": 0, "code_exchanges": 0, "code_exchange_failures": 0,
            "authorize_requests": 0, "revocations": 0, "device_usercode": 0,
            "device_polls": 0, "device_polls_too_fast": 0, "seeds": 0,
            "refresh_in_flight_max": 0,
            "usage_requests": 0, "usage_ok": 0, "usage_unauthorized": 0,
        }
        self.in_flight = 0
        self.last = {"refresh_token_seen": None, "revoked_token": None, "token_request_content_type": None,
                     "token_request_body": None, "authorize_query": None, "refresh_client_id": None,
                     "usage_bearer": None, "usage_account_id": None, "usage_user_agent": None}

    def count(self, key, n=1):
        self.counters[key] = self.counters.get(key, 0) + n

    def stats(self):
        with self.lock:
            out = dict(self.counters)
            out["requests"] = dict(self.counters["requests"])
            out.update({"last_" + k: v for k, v in self.last.items()})
            out["families"] = len(self.families)
            out["active_refresh_tokens"] = sorted(
                f["active"] for f in self.families.values() if not f["invalidated"] and f["active"])
            out["config"] = json.loads(json.dumps(self.config))
            return out

    # -- tokens ---------------------------------------------------------------------------------

    def jwt(self, claims: dict, lifetime: int, kind: str) -> str:
        now = int(time.time()) + int(self.config.get("clock_offset") or 0)
        payload = {
            "iss": "https://auth.openai.com", "aud": [CLIENT_ID], "sub": claims["user_id"],
            "iat": now, "exp": now + int(lifetime), "jti": secrets.token_hex(8), "typ": kind,
            "email": claims["email"],
            "https://api.openai.com/auth": {
                "chatgpt_account_id": claims["account_id"],
                "chatgpt_plan_type": claims["plan"],
                "chatgpt_user_id": claims["user_id"],
            },
            "https://api.openai.com/profile": {"email": claims["email"]},
        }
        header = {"alg": "RS256", "typ": "JWT", "kid": "test-issuer"}
        return ".".join([b64url(json.dumps(header, separators=(",", ":")).encode()), b64url(json.dumps(payload, separators=(",", ":")).encode()),
                         b64url(b"test-issuer-signature")])

    def claims_from_config(self):
        c = self.config
        return {"email": c["email"], "account_id": c["account_id"], "plan": c["plan"], "user_id": c["user_id"]}

    def new_refresh_token(self, family: str, expired=False) -> str:
        token = "rt_" + secrets.token_urlsafe(32)
        self.refresh_tokens[token] = {"family": family, "used": False, "expired": expired}
        self.families[family]["active"] = token
        return token

    def token_set(self, family: str, lifetime=None, refresh_expired=False, poison=None) -> dict:
        fam = self.families[family]
        lifetime = self.config["token_lifetime"] if lifetime is None else lifetime
        access = self.jwt(fam["claims"], lifetime, "access")
        if poison == "esc":
            access = access + "\x1b[2J"
        elif poison == "newline":
            access = access + "\nX-Injected: 1"
        self.access_tokens[access] = family
        fam["active_access"] = access
        return {
            "access_token": access,
            "refresh_token": self.new_refresh_token(family, expired=refresh_expired),
            "id_token": self.jwt(fam["claims"], lifetime, "id"),
            "token_type": "Bearer",
            "expires_in": int(lifetime),
            "scope": "openid profile email offline_access",
        }

    def new_family(self, claims) -> str:
        family = "fam_" + secrets.token_hex(6)
        self.families[family] = {"active": None, "active_access": None, "invalidated": False, "claims": claims}
        return family


ISSUER = Issuer()


def refresh_error(code: str, status: int, message: str):
    return status, {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "TestIssuer/1.0"

    def log_message(self, fmt, *args):  # quiet: tests read stdout for PORT only
        if os.environ.get("TEST_ISSUER_LOG"):
            sys.stderr.write("test_issuer: " + (fmt % args) + "\n")

    # -- plumbing -------------------------------------------------------------------------------

    def issuer_base(self):
        host = self.headers.get("Host") or "127.0.0.1:%d" % self.server.server_address[1]
        return "http://" + host

    def read_body(self):
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            n = -1
        if n < 0 or n > MAX_REQUEST_BODY:
            self.send_json(413, {"error": {"code": "request_too_large"}})
            return None
        return self.rfile.read(n) if n else b""

    def parse_params(self, raw: bytes):
        ctype = (self.headers.get("Content-Type") or "").lower()
        text = raw.decode("utf-8", "replace")
        if "json" in ctype:
            try:
                v = json.loads(text or "{}")
            except ValueError:
                return None
            return v if isinstance(v, dict) else None
        return {k: v[-1] for k, v in urllib.parse.parse_qs(text, keep_blank_values=True).items()}

    def send_raw(self, status: int, body: bytes, ctype="application/json", extra=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for k, v in (extra or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        if self.command != "HEAD":
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

    def send_json(self, status: int, obj, extra=None):
        self.send_raw(status, json.dumps(obj).encode("utf-8"), extra=extra)

    def note_request(self, path):
        with ISSUER.lock:
            reqs = ISSUER.counters["requests"]
            reqs[path] = reqs.get(path, 0) + 1

    # -- dispatch -------------------------------------------------------------------------------

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        self.note_request(url.path)
        if url.path == "/oauth/authorize":
            return self.authorize(url.query)
        if url.path == "/__admin/stats":
            return self.send_json(200, ISSUER.stats())
        if url.path == "/backend-api/wham/usage":
            return self.usage()
        if url.path == "/codex/device":
            return self.send_raw(200, b"<html><body>Enter your code</body></html>", "text/html")
        self.send_json(404, {"error": {"code": "not_found", "message": "no such endpoint"}})

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        self.note_request(url.path)
        raw = self.read_body()
        if raw is None:
            return
        routes = {
            "/oauth/token": self.token,
            "/oauth/revoke": self.revoke,
            "/api/accounts/deviceauth/usercode": self.device_usercode,
            "/api/accounts/deviceauth/token": self.device_token,
            "/__admin/config": self.admin_config,
            "/__admin/seed": self.admin_seed,
            "/__admin/reset": self.admin_reset,
        }
        route = routes.get(url.path)
        if route is None:
            return self.send_json(404, {"error": {"code": "not_found", "message": "no such endpoint"}})
        route(raw)

    # -- /oauth/authorize -----------------------------------------------------------------------

    def authorize(self, query: str):
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(query, keep_blank_values=True).items()}
        with ISSUER.lock:
            ISSUER.count("authorize_requests")
            ISSUER.last["authorize_query"] = q
            error = ISSUER.config.get("authorize_error")
        redirect = q.get("redirect_uri", "")
        if q.get("client_id") != CLIENT_ID or q.get("response_type") != "code" or not redirect.startswith(
                ("http://localhost:", "http://127.0.0.1:")) and not redirect.endswith("/deviceauth/callback"):
            return self.send_raw(400, b"<html><body>invalid authorize request</body></html>", "text/html")
        if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return self.send_raw(400, b"<html><body>PKCE S256 required</body></html>", "text/html")
        sep = "&" if "?" in redirect else "?"
        if error:
            params = {"error": error, "error_description": "scripted error: " + error, "state": q.get("state", "")}
        else:
            code = "ac_" + secrets.token_urlsafe(24)
            with ISSUER.lock:
                ISSUER.auth_codes[code] = {"challenge": q["code_challenge"], "redirect_uri": redirect,
                                           "client_id": CLIENT_ID, "created": time.time()}
            params = {"code": code, "state": q.get("state", "")}
        location = redirect + sep + urllib.parse.urlencode(params)
        self.send_raw(302, b"", "text/plain", {"Location": location})

    # -- /oauth/token ---------------------------------------------------------------------------

    def token(self, raw: bytes):
        params = self.parse_params(raw)
        with ISSUER.lock:
            ISSUER.last["token_request_content_type"] = self.headers.get("Content-Type")
            ISSUER.last["token_request_body"] = raw.decode("utf-8", "replace")[:4096]
        if params is None:
            return self.send_json(400, {"error": "invalid_request", "error_description": "malformed body"})
        grant = params.get("grant_type")
        if grant == "authorization_code":
            return self.exchange(params)
        if grant == "refresh_token":
            return self.refresh(params)
        self.send_json(400, {"error": "unsupported_grant_type"})

    def exchange(self, p):
        with ISSUER.lock:
            fault = ISSUER.config["exchange_faults"].pop(0) if ISSUER.config["exchange_faults"] else None
            if fault is not None:
                ISSUER.count("faults_served")
        if fault is not None and self.serve_fault(fault):
            return
        with ISSUER.lock:
            code = ISSUER.auth_codes.pop(p.get("code", ""), None)
            registered = REGISTERED_BROWSER_REDIRECTS + (self.issuer_base() + "/deviceauth/callback",)
            problem = None
            if code is None:
                problem = (400, {"error": "invalid_grant", "error_description": "unknown or used code"})
            elif p.get("client_id") != CLIENT_ID:
                problem = (401, {"error": "invalid_client"})
            elif p.get("redirect_uri") != code["redirect_uri"]:
                problem = (400, {"error": "invalid_grant", "error_description": "redirect_uri mismatch"})
            elif p.get("redirect_uri") not in registered:
                problem = (403, {"error": "unauthorized_client", "error_description": "redirect_uri not registered"})
            elif s256(p.get("code_verifier", "")) != code["challenge"]:
                problem = (400, {"error": "invalid_grant", "error_description": "PKCE verification failed"})
            if problem:
                ISSUER.count("code_exchange_failures")
            else:
                ISSUER.count("code_exchanges")
                family = ISSUER.new_family(ISSUER.claims_from_config())
                answer = ISSUER.token_set(family, poison=ISSUER.config.get("poison"))
        if problem:
            return self.send_json(*problem)
        self.send_json(200, answer)

    def refresh(self, p):
        with ISSUER.lock:
            ISSUER.count("refresh_requests")
            ISSUER.last["refresh_token_seen"] = p.get("refresh_token")
            ISSUER.last["refresh_client_id"] = p.get("client_id")
            fault = ISSUER.config["faults"].pop(0) if ISSUER.config["faults"] else None
            if fault is not None:
                ISSUER.count("faults_served")
            delay = ISSUER.config.get("refresh_delay") or 0
            ISSUER.in_flight += 1
            ISSUER.counters["refresh_in_flight_max"] = max(ISSUER.counters["refresh_in_flight_max"], ISSUER.in_flight)
        try:
            if delay:
                bounded_sleep(delay, ISSUER.stop)
                if ISSUER.config.get("abandon_if_disconnected") and self.client_gone():
                    # Like a server that notices the hang-up before it starts the rotation.
                    with ISSUER.lock:
                        ISSUER.count("refresh_abandoned")
                    return
            if fault is not None and self.serve_fault(fault):
                return
            status, body = self.rotate(p)
            if fault is not None and fault.get("drop_after_processing"):
                self.close_connection = True
                try:
                    self.connection.shutdown(2)
                except OSError:
                    pass
                return
            self.send_json(status, body)
        finally:
            with ISSUER.lock:
                ISSUER.in_flight -= 1

    def client_gone(self) -> bool:
        """True when the peer has closed its end (readable with nothing to read)."""
        import select, socket
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def serve_fault(self, f) -> bool:
        """Serves a scripted fault; returns False when the request should proceed normally."""
        if "delay" in f:
            bounded_sleep(f["delay"], ISSUER.stop)
        if f.get("hang"):
            # A chunked body that never ends: a space every 250 ms keeps the connection busy, so
            # only the client's total timeout gets it out (bounded here by MAX_SLEEP).
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            deadline = time.monotonic() + MAX_SLEEP
            try:
                self.wfile.write(b"1\r\n{\r\n")
                self.wfile.flush()
                while time.monotonic() < deadline and not ISSUER.stop.is_set():
                    ISSUER.stop.wait(0.25)
                    self.wfile.write(b"1\r\n \r\n")
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, OSError):
                pass
            self.close_connection = True
            return True
        if "huge" in f:
            n = max(0, min(int(f["huge"]), MAX_HUGE))
            self.send_response(int(f.get("status", 200)))
            self.send_header("Content-Type", "application/json")
            if not f.get("chunked_unknown_length"):
                self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"a" * 65536
            sent = 0
            try:
                while sent < n:
                    part = chunk[: min(len(chunk), n - sent)]
                    self.wfile.write(part)
                    sent += len(part)
            except (BrokenPipeError, ConnectionResetError, OSError):
                pass
            self.close_connection = True
            return True
        if "redirect" in f:
            self.send_raw(int(f.get("status", 302)), b"", "text/plain", {"Location": f["redirect"]})
            return True
        if f.get("html"):
            body = b"<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>challenge</body></html>"
            self.send_raw(int(f.get("status", 200)), body, "text/html; charset=utf-8")
            return True
        if "status" in f or "body" in f:
            status = int(f.get("status", 200))
            extra = {"Retry-After": f["retry_after"]} if "retry_after" in f else None
            body = f.get("body")
            if body is None:
                body = {"error": {"message": "scripted fault", "type": "server_error", "code": None}}
            if isinstance(body, str):
                self.send_raw(status, body.encode("utf-8"), f.get("content_type", "application/json"), extra)
            else:
                self.send_json(status, body, extra)
            return True
        return False

    def rotate(self, p):
        with ISSUER.lock:
            token = p.get("refresh_token") or ""
            entry = ISSUER.refresh_tokens.get(token)
            if p.get("client_id") != CLIENT_ID:
                return 401, {"error": "invalid_client"}
            if entry is None:
                ISSUER.count("refresh_unknown")
                return refresh_error("refresh_token_invalidated", 401,
                                     "Your refresh token has been invalidated. Please try signing in again.")
            fam = ISSUER.families[entry["family"]]
            if entry["used"]:
                ISSUER.count("refresh_reused")
                fam["invalidated"] = True
                return refresh_error("refresh_token_reused", int(ISSUER.config["reuse_status"]),
                                     "Your refresh token has already been used to generate a new access token. "
                                     "Please try signing in again.")
            if fam["invalidated"]:
                ISSUER.count("refresh_invalidated")
                return refresh_error("refresh_token_invalidated", 401, "Your session has ended. Please log in again.")
            if entry["expired"]:
                ISSUER.count("refresh_expired")
                return refresh_error("refresh_token_expired", 401,
                                     "Your refresh token has expired. Please try signing in again.")
            entry["used"] = True
            ISSUER.count("refresh_success")
            body = ISSUER.token_set(entry["family"], poison=ISSUER.config.get("poison"))
            for field in ISSUER.config.get("omit_in_refresh") or []:
                body.pop(field, None)
            return 200, body

    # -- /oauth/revoke --------------------------------------------------------------------------

    def revoke(self, raw: bytes):
        p = self.parse_params(raw) or {}
        with ISSUER.lock:
            ISSUER.count("revocations")
            token = p.get("token")
            ISSUER.last["revoked_token"] = token
            entry = ISSUER.refresh_tokens.get(token or "")
            if entry is not None:
                ISSUER.families[entry["family"]]["invalidated"] = True
        self.send_json(200, {})

    # -- /backend-api/wham/usage ----------------------------------------------------------------

    def usage(self):
        auth = self.headers.get("Authorization") or ""
        bearer = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
        account = self.headers.get("ChatGPT-Account-Id")
        with ISSUER.lock:
            ISSUER.count("usage_requests")
            ISSUER.last["usage_bearer"] = bearer
            ISSUER.last["usage_account_id"] = account
            ISSUER.last["usage_user_agent"] = self.headers.get("User-Agent")
            cfg = ISSUER.config
            fault = cfg["usage_faults"].pop(0) if cfg["usage_faults"] else cfg.get("usage_fault_always")
            if fault is not None:
                ISSUER.count("faults_served")
        if fault is not None and self.serve_fault(fault):
            return
        with ISSUER.lock:
            family = ISSUER.access_tokens.get(bearer or "")
            fam = ISSUER.families.get(family) if family else None
            if fam is None or fam["invalidated"] or fam["active_access"] != bearer or account != fam["claims"]["account_id"]:
                ISSUER.count("usage_unauthorized")
                return self.send_json(401, {"detail": "Could not validate your credentials"})
            ISSUER.count("usage_ok")
            body = cfg.get("usage_body")
            answer = cfg.get("usage_answer") or "realistic"
            plan = fam["claims"]["plan"]
        if body is None:
            if answer not in USAGE_ANSWERS:
                return self.send_json(500, {"detail": "unknown usage_answer " + str(answer)})
            body = usage_answer(answer, plan, int(time.time()))
        if isinstance(body, str):
            return self.send_raw(200, body.encode("utf-8"))
        self.send_json(200, body)

    # -- device flow ----------------------------------------------------------------------------

    def device_usercode(self, raw: bytes):
        p = self.parse_params(raw) or {}
        with ISSUER.lock:
            ISSUER.count("device_usercode")
            cfg = ISSUER.config
            if cfg["device_disabled"]:
                return self.send_json(404, {"error": {"code": "not_found", "message": "Device login is not enabled"}})
            if p.get("client_id") != CLIENT_ID:
                return self.send_json(400, {"error": {"code": "invalid_client"}})
            device_id = "da_" + secrets.token_urlsafe(16)
            alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
            user_code = "".join(secrets.choice(alphabet) for _ in range(4)) + "-" + \
                "".join(secrets.choice(alphabet) for _ in range(5))
            ISSUER.devices[device_id] = {"user_code": user_code, "polls": 0, "created": time.time(),
                                         "last_poll": None, "interval": cfg["interval"]}
            interval = str(cfg["interval"]) if cfg["interval_as_string"] else cfg["interval"]
            answer = {"device_auth_id": device_id, "user_code": user_code, "interval": interval}
            if cfg["device_send_expires_in"]:
                answer["expires_in"] = cfg["device_expires_in"]
        self.send_json(200, answer)

    def device_token(self, raw: bytes):
        p = self.parse_params(raw) or {}
        with ISSUER.lock:
            fault = ISSUER.config["device_faults"].pop(0) if ISSUER.config["device_faults"] else None
            if fault is not None:
                ISSUER.count("faults_served")
        if fault is not None and self.serve_fault(fault):
            with ISSUER.lock:
                ISSUER.count("device_polls")
            return
        with ISSUER.lock:
            ISSUER.count("device_polls")
            cfg = ISSUER.config
            dev = ISSUER.devices.get(p.get("device_auth_id", ""))
            if dev is None or dev["user_code"] != p.get("user_code"):
                return self.send_json(400, {"error": {"code": "invalid_request", "message": "unknown device code"}})
            now = time.time()
            if dev["last_poll"] is not None and now - dev["last_poll"] < float(dev["interval"]) - 0.25:
                ISSUER.count("device_polls_too_fast")
            dev["last_poll"] = now
            if now - dev["created"] > float(cfg["device_expires_in"]):
                return self.send_json(403, {"error": {"code": "deviceauth_expired", "message": "code expired"}})
            if cfg["device_deny"]:
                return self.send_json(403, {"error": {"code": "access_denied", "message": "denied"}})
            dev["polls"] += 1
            if dev["polls"] <= int(cfg["approve_after"]):
                return self.send_json(403, {"error": {"code": "deviceauth_authorization_pending",
                                                      "message": "authorization pending"}})
            verifier = b64url(secrets.token_bytes(64))
            challenge = s256(verifier)
            code = "ac_" + secrets.token_urlsafe(24)
            ISSUER.auth_codes[code] = {"challenge": challenge, "client_id": CLIENT_ID, "created": now,
                                       "redirect_uri": self.issuer_base() + "/deviceauth/callback"}
            del ISSUER.devices[p["device_auth_id"]]
        self.send_json(200, {"authorization_code": code, "code_challenge": challenge, "code_verifier": verifier})

    # -- admin ----------------------------------------------------------------------------------

    def admin_config(self, raw: bytes):
        try:
            p = json.loads(raw.decode("utf-8") or "{}")
        except ValueError:
            return self.send_json(400, {"error": "bad json"})
        if not isinstance(p, dict):
            return self.send_json(400, {"error": "expected an object"})
        with ISSUER.lock:
            unknown = [k for k in p if k not in DEFAULT_CONFIG]
            if unknown:
                return self.send_json(400, {"error": "unknown settings", "keys": unknown})
            for k, v in p.items():
                ISSUER.config[k] = list(v) if k in ("faults", "exchange_faults", "device_faults", "usage_faults") else v
            cfg = json.loads(json.dumps(ISSUER.config))
        self.send_json(200, cfg)

    def admin_seed(self, raw: bytes):
        try:
            p = json.loads(raw.decode("utf-8") or "{}")
        except ValueError:
            return self.send_json(400, {"error": "bad json"})
        with ISSUER.lock:
            ISSUER.count("seeds")
            claims = ISSUER.claims_from_config()
            for k in ("email", "account_id", "plan", "user_id"):
                if k in p:
                    claims[k] = p[k]
            family = ISSUER.new_family(claims)
            lifetime = int(p.get("expires_in", ISSUER.config["token_lifetime"]))
            ts = ISSUER.token_set(family, lifetime=lifetime, refresh_expired=bool(p.get("refresh_expired")))
            ts["account_id"] = claims["account_id"]
            ts["email"] = claims["email"]
            ts["plan"] = claims["plan"]
            ts["expires_at"] = int(time.time()) + lifetime
        self.send_json(200, ts)

    def admin_reset(self, raw: bytes):
        with ISSUER.lock:
            ISSUER.reset()
        self.send_json(200, {})


def usage_window(used, seconds, after, now):
    return {"used_percent": used, "limit_window_seconds": seconds, "reset_after_seconds": after, "reset_at": now + after}


def usage_answer(kind, plan, now):
    """The body of an accepted usage request (see USAGE_ANSWERS)."""
    if kind == "empty":
        return {}
    if kind == "malformed":
        return '{"plan_type": "plus", "rate_limit": {"primary_window": {"used_percent": 4'
    if kind == "not_object":
        return '[{"plan_type": "plus"}]'
    if kind == "hostile_names":
        return {
            "plan_type": "pro\u001b[31m\r\n\u0085",
            "rate_limit": {"allowed": True, "limit_reached": False,
                           "primary_window": usage_window(10, 18000, 600, now)},
            "credits": {"has_credits": True, "unlimited": False, "balance": "1\u001b]52;c;ZWNobyBwd25lZA==\u00072"},
            "additional_rate_limits": [{
                "limit_name": "evil\u001b]52;c;ZWNobyBwd25lZA==\u0007\u009b31m\u202e\u001b[2J",
                "metered_feature": "x\u001b[1;1H\u007f",
                "rate_limit": {"primary_window": usage_window(20, 3600, 60, now)},
            }],
        }
    if kind == "huge_numbers":
        huge = 1e308
        return {
            "plan_type": "plus",
            "rate_limit": {"primary_window": {"used_percent": huge, "limit_window_seconds": huge,
                                              "reset_after_seconds": huge, "reset_at": huge},
                           "secondary_window": {"used_percent": -huge, "limit_window_seconds": 10 ** 30,
                                                "reset_after_seconds": -(10 ** 30), "reset_at": 10 ** 40}},
            "credits": {"balance": huge},
        }
    if kind == "nonsense_windows":
        return {
            "plan_type": "plus",
            "rate_limit": {"primary_window": {"used_percent": "42", "limit_window_seconds": 0,
                                              "reset_after_seconds": 99999999, "reset_at": "soon"},
                           "secondary_window": {"used_percent": 142, "limit_window_seconds": -604800,
                                                "reset_at": now - 10 * 86400}},
        }
    return {  # realistic
        "plan_type": plan,
        "rate_limit": {"allowed": True, "limit_reached": False,
                       "primary_window": usage_window(42, 18000, 2 * 3600 + 3 * 60 + 30, now),
                       "secondary_window": usage_window(12.5, 604800, 4 * 86400 + 6 * 3600 + 30, now)},
        "credits": {"has_credits": False, "unlimited": False, "balance": "0"},
        "additional_rate_limits": [{
            "limit_name": "GPT-5-Codex-Mini", "metered_feature": "codex_mini",
            "rate_limit": {"allowed": True, "limit_reached": False,
                           "primary_window": usage_window(3, 18000, 3600 + 30, now)},
        }],
        "rate_limit_reached_type": None,
        "some_future_field": {"ignored": True},
    }


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    if args.host not in ("127.0.0.1", "::1", "localhost"):
        ap.error("the test issuer only listens on loopback")
    server = Server((args.host, args.port), Handler)

    def shutdown(*_):
        ISSUER.stop.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)

    def watch_stdin():
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        shutdown()

    threading.Thread(target=watch_stdin, daemon=True).start()
    sys.stdout.write("PORT=%d\n" % server.server_address[1])
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        sys.stdout.flush()
        # The stdin watcher may still be blocked in read(); do not wait for it at shutdown.
        os._exit(0)


if __name__ == "__main__":
    main()
