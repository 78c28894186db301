"""`floodgate grafana push` through grafana-client, against a small local
HTTP server that speaks the Grafana endpoints used (search, folders,
dashboards/db, health) with Grafana's documented payloads and status codes
(fake_grafana.py): Grafana is not packaged for these machines, so no real one
can run in the tests."""

from __future__ import annotations

import socket

import pytest

from console.cli import main
from console.observability.errors import ObservabilityError
from console.observability.grafana_dashboard import DASHBOARD_UID, build_dashboard
from console.observability.grafana_push import connect, push_dashboard

from .fake_grafana import FakeGrafana


@pytest.fixture
def grafana():
    with FakeGrafana() as fake:
        yield fake


@pytest.fixture(scope="module")
def model() -> dict:
    return build_dashboard()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_token_push_creates_in_general_then_overwrite_updates(grafana, model):
    api = connect(grafana.url, token=grafana.token)
    first = push_dashboard(api, grafana.url, model)
    assert (first.action, first.uid, first.version, first.folder) == (
        "created", DASHBOARD_UID, 1, "General")
    assert first.url == f"{grafana.url}/d/{DASHBOARD_UID}/floodgate-cluster"
    sent = grafana.posts[0]
    assert sent["overwrite"] is False and "folderUid" not in sent
    assert sent["dashboard"]["id"] is None and sent["dashboard"]["panels"]
    second = push_dashboard(api, grafana.url, model, overwrite=True)
    assert (second.action, second.version) == ("updated", 2)
    assert [p for m, p in grafana.requests if m == "GET"][:2] == ["/api/health", "/api/folders"]


def test_existing_dashboard_needs_overwrite(grafana, model):
    api = connect(grafana.url, token=grafana.token)
    push_dashboard(api, grafana.url, model, folder="SRE")
    with pytest.raises(ObservabilityError, match="already exists .folder SRE.; pass --overwrite"):
        push_dashboard(api, grafana.url, model, folder="SRE")
    assert len(grafana.posts) == 1  # refused before writing


def test_a_concurrent_save_answers_412(grafana, model):
    """Saved by someone else between our search and our POST: Grafana's 412."""
    api = connect(grafana.url, token=grafana.token)
    push_dashboard(api, grafana.url, model)
    grafana.search = lambda query: []  # the search misses it
    with pytest.raises(ObservabilityError, match="changed by someone else.*--overwrite"):
        push_dashboard(api, grafana.url, model)


def test_basic_auth_into_a_folder(grafana, model):
    api = connect(grafana.url, user="admin", password="secret")
    result = push_dashboard(api, grafana.url, model, folder="SRE")
    assert result.folder == "SRE"
    assert grafana.posts[0]["folderUid"] == "nErXDvCkzz"


@pytest.mark.parametrize("credential", [{"token": "wrong"},
                                        {"user": "admin", "password": "wrong"}])
def test_refused_login(grafana, model, credential):
    api = connect(grafana.url, **credential)
    with pytest.raises(ObservabilityError, match="login refused"):
        push_dashboard(api, grafana.url, model)
    assert not grafana.posts


def test_missing_folder_names_the_ones_there(grafana, model):
    api = connect(grafana.url, token=grafana.token)
    with pytest.raises(ObservabilityError, match="no folder named 'Ops' .folders: SRE."):
        push_dashboard(api, grafana.url, model, folder="Ops")


def test_unreachable_host(model):
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ObservabilityError, match="cannot reach Grafana: connection refused"):
        push_dashboard(connect(url, token="t", timeout=2), url, model)


def test_not_a_grafana(grafana, model):
    api = connect(grafana.url + "/nothing-here", token=grafana.token)
    with pytest.raises(ObservabilityError, match="checking health failed: Not found"):
        push_dashboard(api, grafana.url + "/nothing-here", model)


def test_cli_push_and_its_one_line_errors(grafana, tmp_path, capsys):
    ok = ["grafana", "push", "--url", grafana.url, "--token", grafana.token, "--folder", "SRE"]
    assert main(ok) == 0
    assert "created dashboard floodgate-cluster (version 1) in folder SRE" in \
        capsys.readouterr().out
    assert main(ok) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--overwrite" in err
    assert main([*ok, "--overwrite", "--json"]) == 0
    assert '"action": "updated"' in capsys.readouterr().out
    assert main(["grafana", "push", "--url", grafana.url, "--user", "admin", "--password",
                 "nope"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "login refused" in err
    assert main(["grafana", "push", "--url", grafana.url]) == 2
    assert main(["grafana", "push", "--url", "grafana:3000", "--token", "t"]) == 2
    assert "not a Grafana URL" in capsys.readouterr().err


def test_cli_pushes_a_dashboard_file(grafana, tmp_path):
    path = tmp_path / "dash.json"
    assert main(["grafana", "dashboard", "--datasource", "Thanos", "--out", str(path)]) == 0
    assert main(["grafana", "push", "--url", grafana.url, "--token", grafana.token,
                 "--dashboard", str(path)]) == 0
    sent = grafana.posts[0]["dashboard"]
    assert sent["templating"]["list"][0]["current"]["value"] == "Thanos"
    (tmp_path / "bad.json").write_text("{}")
    assert main(["grafana", "push", "--url", grafana.url, "--token", grafana.token,
                 "--dashboard", str(tmp_path / "bad.json")]) == 2
