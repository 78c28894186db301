"""A small stand-in for the few Grafana HTTP API endpoints `floodgate grafana
push` uses, for tests only: Grafana itself is not packaged for these machines.

It answers with the payloads and status codes of Grafana's HTTP API docs
(grafana.com/docs/grafana/latest/developers/http_api/): GET /api/health,
GET /api/folders, GET /api/search (type=dash-db, dashboardUIDs), POST
/api/dashboards/db (200 with id/uid/url/status/version/slug; 412
"name-exists"/"version-mismatch" without overwrite; 400 for an unknown
folderUid), and 401 {"message": "Invalid username or password"} (basic auth)
or {"message": "Invalid API key"} (token) for a refused login.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


def slugify(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


class FakeGrafana:
    def __init__(self, user: str = "admin", password: str = "secret",
                 token: str = "glsa_floodgate_test") -> None:
        self.user, self.password, self.token = user, password, token
        self.folders = [{"id": 7, "uid": "nErXDvCkzz", "title": "SRE"}]
        self.dashboards: dict[str, dict] = {}  # uid -> {"dashboard", "folderUid", "version"}
        self.requests: list[tuple[str, str]] = []
        self.posts: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                fake.handle(self, "GET")

            def do_POST(self) -> None:  # noqa: N802
                fake.handle(self, "POST")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                        daemon=True)

    def __enter__(self) -> FakeGrafana:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- the API ---
    def handle(self, req: BaseHTTPRequestHandler, method: str) -> None:
        url = urlparse(req.path)
        self.requests.append((method, url.path))
        body = None
        if method == "POST":
            body = json.loads(req.rfile.read(int(req.headers.get("Content-Length", 0))) or b"{}")
        if method == "GET" and url.path == "/api/health":
            return self.reply(req, 200, {"commit": "03f502a94d", "database": "ok",
                                         "version": "11.6.0"})
        refused = self.refused(req.headers.get("Authorization", ""))
        if refused:
            return self.reply(req, 401, {"message": refused, "statusCode": 401})
        if method == "GET" and url.path == "/api/folders":
            return self.reply(req, 200, self.folders)
        if method == "GET" and url.path == "/api/search":
            return self.reply(req, 200, self.search(parse_qs(url.query)))
        if method == "POST" and url.path == "/api/dashboards/db":
            self.posts.append(body)
            return self.reply(req, *self.save(body))
        return self.reply(req, 404, {"message": "Not found"})

    def refused(self, auth: str) -> str | None:
        if auth.startswith("Bearer "):
            return None if auth[7:] == self.token else "Invalid API key"
        if auth.startswith("Basic "):
            user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
            if (user, password) == (self.user, self.password):
                return None
        return "Invalid username or password"

    def search(self, query: dict) -> list[dict]:
        uids = query.get("dashboardUIDs", [])
        hits = []
        for uid, saved in self.dashboards.items():
            if uids and uid not in uids:
                continue
            folder = next((f for f in self.folders if f["uid"] == saved["folderUid"]), None)
            title = saved["dashboard"]["title"]
            hit = {"id": saved["id"], "uid": uid, "title": title,
                   "uri": f"db/{slugify(title)}", "url": f"/d/{uid}/{slugify(title)}",
                   "slug": "", "type": "dash-db", "tags": saved["dashboard"].get("tags", []),
                   "isStarred": False}
            if folder:
                hit.update({"folderId": folder["id"], "folderUid": folder["uid"],
                            "folderTitle": folder["title"],
                            "folderUrl": f"/dashboards/f/{folder['uid']}/"})
            hits.append(hit)
        return hits

    def save(self, body: dict) -> tuple[int, dict]:
        dash = body["dashboard"]
        folder_uid = body.get("folderUid") or ""
        if folder_uid and not any(f["uid"] == folder_uid for f in self.folders):
            return 400, {"message": "folder not found", "status": "not-found"}
        uid = dash.get("uid")
        old = self.dashboards.get(uid)
        if old and not body.get("overwrite"):
            return 412, {"message": "The dashboard has been changed by someone else",
                         "status": "version-mismatch"}
        version = old["version"] + 1 if old else 1
        ident = old["id"] if old else len(self.dashboards) + 1
        self.dashboards[uid] = {"dashboard": dash, "folderUid": folder_uid, "version": version,
                                "id": ident}
        slug = slugify(dash["title"])
        return 200, {"id": ident, "uid": uid, "url": f"/d/{uid}/{slug}", "status": "success",
                     "version": version, "slug": slug}

    @staticmethod
    def reply(req: BaseHTTPRequestHandler, code: int, payload) -> None:
        data = json.dumps(payload).encode()
        req.send_response(code)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(data)))
        req.end_headers()
        req.wfile.write(data)
