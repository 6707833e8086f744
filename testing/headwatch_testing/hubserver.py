"""A Hub-protocol server on loopback, for tests of the network path with the real huggingface_hub client.

``HubServer`` serves repos with branches the way the Hub does, as far as huggingface_hub (2.x) and
transformers (5.x) use it:

- ``GET /api/models/{repo}/refs``: branches and tags (``list_repo_refs``);
- ``GET /api/models/{repo}/tree/{revision}``: the file list (``list_repo_files``);
- ``GET /api/models/{repo}/revision/{revision}``: repo info at a revision (``snapshot_download``);
- ``HEAD``/``GET /{repo}/resolve/{revision}/{file}``: a small file answers 200 with ``ETag`` (its git
  blob id), ``X-Repo-Commit`` and ``Content-Length``; a ``.safetensors`` or ``.bin`` file (an LFS
  file on the Hub) answers 302 to a second origin (the "CDN") with ``X-Linked-Etag`` (its sha256),
  ``X-Linked-Size`` and ``X-Repo-Commit``; the CDN serves ``Range`` requests (206);
- errors with the Hub's ``X-Error-Code`` (``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``).

It is stdlib ``http.server`` in threads, bound to 127.0.0.1 only: no package serves Hub repos with
branches offline (``olah`` mirrors an upstream Hub; ``pytest-httpserver`` would still need every
endpoint written as a handler, and its WSGI layer hides the socket that the fault tests cut).
Every connection is HTTP/1.0 (one request each), so a stopped server is really gone. Bounded: it
stops itself after ``lifetime_s`` or ``max_requests``, and a stalled response waits at most
``stall_s``. huggingface_hub reads ``HF_ENDPOINT`` at import, so in-process tests point its
constants at the server (tests/test_hub_server.py, fixture ``endpoint``); tests that start processes
set only ``HF_ENDPOINT``. Part of the test harness (not shipped); its own tests are
tests/test_hub_server.py.
"""
from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit



class LazyCommits(Mapping):
    """commit -> {path: content} for commits whose files are made on first use (and kept): a repo
    with hundreds of branches costs nothing until a branch is listed or downloaded."""

    def __init__(self, make: dict[str, Callable[[], dict[str, bytes]]]):
        self._make = make  # commit -> factory
        self._made: dict[str, dict[str, bytes]] = {}
        self._lock = threading.Lock()

    def __getitem__(self, commit: str) -> dict[str, bytes]:
        make = self._make[commit]  # KeyError for an unknown commit, as a dict
        with self._lock:
            if commit not in self._made:
                self._made[commit] = make()
            return self._made[commit]

    def __contains__(self, commit) -> bool:
        return commit in self._make

    def __iter__(self) -> Iterator[str]:
        return iter(self._make)

    def __len__(self) -> int:
        return len(self._make)

    def made(self) -> list[dict[str, bytes]]:
        with self._lock:
            return list(self._made.values())


@dataclass
class HubRepo:
    """A repo: branch -> commit, and the files of each commit (a dict, or LazyCommits)."""

    repo_id: str
    branches: dict[str, str]
    files: Mapping[str, dict[str, bytes]]  # commit -> {path: content}

    @classmethod
    def from_folders(cls, repo_id: str, folders: dict[str, Path], aliases: dict[str, str] | None = None) -> "HubRepo":
        """One commit per branch from a ``save_pretrained`` folder; ``aliases`` name more branches."""
        branches, files = {}, {}
        for branch, folder in folders.items():
            content = {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir()) if p.is_file()}
            digest = hashlib.sha1(f"{repo_id}@{branch}".encode())
            for name, data in content.items():
                digest.update(name.encode() + data)
            branches[branch] = digest.hexdigest()
            files[branches[branch]] = content
        for alias, target in (aliases or {}).items():
            branches[alias] = branches[target]
        return cls(repo_id, branches, files)


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def is_lfs(path: str) -> bool:
    """Weight files are LFS files on the Hub (its default .gitattributes: *.safetensors, *.bin)."""
    return path.endswith((".safetensors", ".bin"))


@dataclass
class Fault:
    """Misbehaviour of the CDN for one blob: send ``at`` bytes, then ``"cut"`` the connection or
    ``"stall"`` (until ``release`` is set or ``stall_s`` passes) and cut. Fires once. ``"status"``:
    answer every request for the blob with HTTP status ``at`` (a 502 from a failing CDN), until removed."""

    kind: str
    at: int
    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


class HubServer:
    """The Hub protocol on 127.0.0.1 (API + resolve on one port, the LFS "CDN" on another)."""

    def __init__(self, repos: list[HubRepo], *, lifetime_s: float = 300, max_requests: int = 2000,
                 stall_s: float = 60):
        self.repos = {r.repo_id: r for r in repos}
        self.blobs: dict[str, bytes] = {}  # sha256 -> LFS content, registered as files are made
        self._sha: dict[int, str] = {}  # id(content) -> its sha256 (contents are kept by their repos)
        self._oid: dict[int, str] = {}  # id(content) -> its git blob id
        for r in repos:
            for fs in (r.files.made() if isinstance(r.files, LazyCommits) else r.files.values()):
                self._register(fs)
        self.faults: dict[str, Fault] = {}  # sha256 -> fault
        self.api_status: list[tuple[int, dict[str, str]]] = []  # canned replies for the next API calls
        self.log: list[dict] = []
        self.lifetime_s, self.max_requests, self.stall_s = lifetime_s, max_requests, stall_s
        self._lock = threading.Lock()
        self._servers: list[ThreadingHTTPServer] = []
        self._timer: threading.Timer | None = None
        self.stopped = threading.Event()

    # -- lifecycle --
    def start(self) -> "HubServer":
        for role in ("hub", "cdn"):
            srv = ThreadingHTTPServer(("127.0.0.1", 0), self._handler(role))
            srv.daemon_threads = True
            self._servers.append(srv)
            threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self._servers[0].server_address[1]}"
        self.cdn = f"http://127.0.0.1:{self._servers[1].server_address[1]}"
        self._timer = threading.Timer(self.lifetime_s, self.stop)  # stops itself, whatever the test does
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        if self.stopped.is_set():
            return
        self.stopped.set()
        if self._timer is not None:
            self._timer.cancel()
        for f in self.faults.values():
            f.release.set()
        for srv in self._servers:
            srv.shutdown()
            srv.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _register(self, files: dict[str, bytes]) -> None:
        for path, data in files.items():
            if is_lfs(path) and id(data) not in self._sha:
                self._sha[id(data)] = sha = hashlib.sha256(data).hexdigest()
                self.blobs[sha] = data

    def files(self, repo: HubRepo, commit: str) -> dict[str, bytes]:
        """The files of ``commit`` (made now if lazy), their LFS blobs servable by the CDN."""
        files = repo.files[commit]
        with self._lock:
            self._register(files)
        return files

    def sha256(self, data: bytes) -> str:
        return self._sha.get(id(data)) or hashlib.sha256(data).hexdigest()

    def git_blob_id(self, data: bytes) -> str:
        """git_blob_id(data), computed once per content (weights are tens of MB, asked for per request)."""
        with self._lock:
            oid = self._oid.get(id(data))
        if oid is None:
            oid = git_blob_id(data)
            with self._lock:
                self._oid[id(data)] = oid
        return oid

    def requests(self, method: str | None = None, contains: str = "") -> list[dict]:
        with self._lock:
            return [r for r in self.log if (method is None or r["method"] == method) and contains in r["path"]]

    # -- protocol --
    def _repo_and_commit(self, repo_id: str, revision: str):
        """(repo, commit, None) or (None, None, (status, error code, message))."""
        repo = self.repos.get(repo_id)
        if repo is None:
            return None, None, (404, "RepoNotFound", f"Repository {repo_id} not found")
        revision = unquote(revision)
        commit = repo.branches.get(revision) or (revision if revision in repo.files else None)
        if commit is None:
            return repo, None, (404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return repo, commit, None

    def _handler(self, role: str):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection: a stopped server is gone

            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):
                self._dispatch(head=True)

            def do_GET(self):
                self._dispatch(head=False)

            # replies
            def _reply(self, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False,
                       entry: dict | None = None):
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, str(v))
                if "Content-Length" not in (headers or {}):
                    self.send_header("Content-Length", str(len(body)))
                if entry is not None:  # logged before the client can see the reply
                    entry.update(status=status, sent=0 if head else len(body))
                self.end_headers()
                if not head and body:
                    self.wfile.write(body)

            def _json(self, obj, entry, head=False):
                self._reply(200, json.dumps(obj).encode(), {"Content-Type": "application/json"}, head, entry)

            def _error(self, status, code, message, entry, head=False, extra=None):
                self._reply(status, json.dumps({"error": message}).encode(),
                            {"Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": message,
                             **(extra or {})}, head, entry)

            def _dispatch(self, head: bool):
                url = urlsplit(self.path)
                entry = {"method": self.command, "path": self.path, "role": role,
                         "range": self.headers.get("Range"), "status": None, "sent": 0}
                with server._lock:
                    server.log.append(entry)
                    n = len(server.log)
                if n > server.max_requests:  # bounded: a runaway client loop ends the server
                    threading.Thread(target=server.stop, daemon=True).start()
                    return self._reply(503, b"request budget spent", entry=entry)
                if role == "cdn":
                    return self._blob(url.path, head, entry)
                if url.path.startswith("/api/models/"):
                    if server.api_status:
                        status, headers = server.api_status.pop(0)
                        return self._reply(status, b"{}", headers, head, entry)
                    return self._api(url.path[len("/api/models/"):], parse_qs(url.query), head, entry)
                m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", url.path)
                if m:
                    return self._resolve(m.group(1), m.group(2), unquote(m.group(3)), head, entry)
                return self._error(404, "EntryNotFound", f"no route {url.path}", entry, head)

            def _api(self, rest: str, query, head, entry):
                m = re.fullmatch(r"([^/]+/[^/]+)/(refs|tree|revision)(?:/([^/]+))?(?:/(.*))?", rest)
                if not m:
                    return self._error(404, "RepoNotFound", f"no API route {rest}", entry, head)
                repo_id, what, revision, _sub = m.groups()
                if what == "refs":
                    repo = server.repos.get(repo_id)
                    if repo is None:
                        return self._error(404, "RepoNotFound", f"Repository {repo_id} not found", entry, head)
                    branches = [{"name": b, "ref": f"refs/heads/{b}", "targetCommit": c}
                                for b, c in sorted(repo.branches.items())]
                    return self._json({"branches": branches, "converts": [], "tags": []}, entry, head)
                repo, commit, err = server._repo_and_commit(repo_id, revision or "main")
                if err:
                    return self._error(err[0], err[1], err[2], entry, head)
                files = server.files(repo, commit)
                if what == "tree":
                    tree = []
                    for path, data in sorted(files.items()):
                        item = {"type": "file", "oid": server.git_blob_id(data), "size": len(data), "path": path}
                        if is_lfs(path):
                            item["lfs"] = {"oid": server.sha256(data), "size": len(data), "pointerSize": 134}
                        tree.append(item)
                    return self._json(tree, entry, head)
                return self._json({"id": repo_id, "modelId": repo_id, "sha": commit, "private": False,
                                   "disabled": False, "gated": False, "downloads": 0, "likes": 0, "tags": [],
                                   "siblings": [{"rfilename": p} for p in sorted(files)]}, entry, head)

            def _resolve(self, repo_id, revision, path, head, entry):
                repo, commit, err = server._repo_and_commit(repo_id, revision)
                if err:
                    return self._error(err[0], err[1], err[2], entry, head)
                data = server.files(repo, commit).get(path)
                if data is None:
                    return self._error(404, "EntryNotFound", f"{path} does not exist at {commit}", entry, head,
                                       {"X-Repo-Commit": commit})
                common = {"X-Repo-Commit": commit, "ETag": f'"{server.git_blob_id(data)}"', "Accept-Ranges": "bytes"}
                if is_lfs(path):
                    sha = server.sha256(data)
                    return self._reply(302, b"", {**common, "Location": f"{server.cdn}/blobs/{sha}",
                                                  "X-Linked-Etag": f'"{sha}"', "X-Linked-Size": len(data)}, head, entry)
                return self._ranged(data, common, head, entry)

            def _blob(self, path, head, entry):
                sha = path.rsplit("/", 1)[-1]
                data = server.blobs.get(sha)
                if data is None:
                    return self._reply(404, b"no such blob", head=head, entry=entry)
                if sha in server.faults and server.faults[sha].kind == "status":
                    return self._reply(server.faults[sha].at, b"bad gateway", head=head, entry=entry)
                return self._ranged(data, {"ETag": f'"{sha}"', "Accept-Ranges": "bytes"}, head, entry,
                                    server.faults.pop(sha, None) if not head else None)

            def _ranged(self, data: bytes, headers: dict, head, entry, fault: Fault | None = None):
                start, end, status = 0, len(data) - 1, 200
                rng = self.headers.get("Range")
                if rng:
                    m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
                    if not m or int(m.group(1)) >= len(data):
                        return self._reply(416, b"", {"Content-Range": f"bytes */{len(data)}"}, head, entry)
                    start, end, status = int(m.group(1)), int(m.group(2) or len(data) - 1), 206
                    headers = {**headers, "Content-Range": f"bytes {start}-{end}/{len(data)}"}
                body = data[start:end + 1]
                if fault is None or head:
                    return self._reply(status, body, headers, head, entry)
                # misbehave: promise the whole body, send the first part, then stall and/or cut
                self.send_response(status)
                for k, v in {**headers, "Content-Length": len(body)}.items():
                    self.send_header(k, str(v))
                self.end_headers()
                part = body[: max(fault.at - start, 0)]
                entry.update(status=status, sent=len(part), fault=fault.kind)
                self.wfile.write(part)
                self.wfile.flush()
                fault.reached.set()
                if fault.kind == "stall":
                    fault.release.wait(server.stall_s)
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self.close_connection = True

        return Handler
