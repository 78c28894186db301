"""Push a dashboard to Grafana through grafana-client (the maintained
continuation of grafana-api).

The endpoints used, in order: GET /api/health (is anything there), GET
/api/folders (does the login work, does the folder exist), GET /api/search
(is the dashboard there already: created or updated), POST /api/dashboards/db.
Every failure becomes one ObservabilityError line that says what to do.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlparse

from console.observability.errors import ObservabilityError


@dataclass(frozen=True)
class PushResult:
    uid: str
    url: str
    version: int | None
    folder: str  # title; "General" when no folder was named
    action: str  # created | updated

    def to_dict(self) -> dict:
        return {"uid": self.uid, "url": self.url, "version": self.version,
                "folder": self.folder, "action": self.action}


def check_url(url: str) -> str:
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ObservabilityError(f"{url!r} is not a Grafana URL (http[s]://HOST[:PORT])")
    return url.rstrip("/")


def connect(url: str, token: str | None = None, user: str | None = None,
            password: str | None = None, timeout: float = 5.0):
    from grafana_client import GrafanaApi

    credential = token if token else (user or "", password or "")
    return GrafanaApi.from_url(check_url(url), credential=credential, timeout=timeout)


def _call(url: str, what: str, fn, *args, **kwargs):
    """Run one grafana-client call; turn its failures into one line."""
    import niquests
    from grafana_client.client import (
        GrafanaClientError,
        GrafanaException,
        GrafanaServerError,
        GrafanaTimeoutError,
        GrafanaUnauthorizedError,
    )

    try:
        return fn(*args, **kwargs)
    except GrafanaUnauthorizedError:
        raise ObservabilityError(f"{url}: login refused (check --token, or --user and "
                                 "--password)") from None
    except GrafanaTimeoutError:
        raise ObservabilityError(f"{url}: no answer in time while {what}") from None
    except GrafanaClientError as exc:
        if exc.status_code == 412:  # POST /api/dashboards/db: same uid or title, newer version
            raise ObservabilityError(f"{url}: {what} refused: {_message(exc)}; pass --overwrite"
                                     ) from None
        if exc.status_code == 403:
            raise ObservabilityError(f"{url}: not allowed to {what} (the account or token "
                                     "lacks the permission)") from None
        raise ObservabilityError(f"{url}: {what} failed: {_message(exc)}") from None
    except GrafanaServerError as exc:
        raise ObservabilityError(f"{url}: Grafana failed while {what}: {_message(exc)}"
                                 ) from None
    except (GrafanaException, niquests.exceptions.RequestException) as exc:
        raise ObservabilityError(f"{url}: cannot reach Grafana: {_reason(exc)}") from None
    except ValueError as exc:  # an answer that is not JSON: not a Grafana
        raise ObservabilityError(f"{url}: does not answer like Grafana while {what}: {exc}"
                                 ) from None


def _message(exc) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and response.get("message"):
        return f"{response['message']} (HTTP {exc.status_code})"
    return str(exc)


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    for marker in ("Connection refused", "Name or service not known", "timed out",
                   "No route to host", "Temporary failure in name resolution"):
        if marker in text:
            return marker.lower()
    return text.splitlines()[0][:200]


def health(api, url: str) -> dict:
    """GET /api/health: {"database": "ok", "version": ...}; anonymous."""
    answer = _call(url, "checking health", api.client.GET, "/health")
    if not isinstance(answer, dict) or "database" not in answer:
        raise ObservabilityError(f"{url}: /api/health does not answer like Grafana")
    if answer.get("database") != "ok":
        raise ObservabilityError(f"{url}: Grafana is up but its database is "
                                 f"{answer.get('database')!r}")
    return answer


def find_folder(api, url: str, title: str) -> dict:
    folders = _call(url, "listing folders", api.folder.get_all_folders)
    for folder in folders or []:
        if folder.get("title") == title:
            return folder
    names = ", ".join(sorted(f.get("title", "?") for f in folders or [])) or "none"
    raise ObservabilityError(f"{url}: no folder named {title!r} (folders: {names}); "
                             "create it in Grafana first")


def push_dashboard(api, url: str, model: dict, folder: str | None = None,
                   overwrite: bool = False, message: str = "pushed by floodgate") -> PushResult:
    """Check the server and login, find the folder, then create or update the dashboard."""
    health(api, url)
    folder_uid = None
    if folder:
        folder_uid = find_folder(api, url, folder)["uid"]
    else:  # still proves the login before the write
        _call(url, "listing folders", api.folder.get_all_folders)
    uid = model.get("uid")
    existing = []
    if uid:
        existing = _call(url, "searching dashboards", api.search.search_dashboards,
                         dashboard_uids=uid, type_="dash-db") or []
    if existing and not overwrite:
        where = existing[0].get("folderTitle") or "General"
        raise ObservabilityError(f"{url}: dashboard {uid!r} already exists (folder {where}); "
                                 "pass --overwrite to replace it")
    body = {"dashboard": {**model, "id": None}, "overwrite": overwrite, "message": message}
    if folder_uid:
        body["folderUid"] = folder_uid
    answer = _call(url, "saving the dashboard", api.dashboard.update_dashboard, body)
    base = url.split("://", 1)[0] + "://" + urlparse(url).netloc
    return PushResult(answer.get("uid", uid or ""), base + answer.get("url", ""),
                      answer.get("version"), folder or "General",
                      "updated" if existing else "created")

