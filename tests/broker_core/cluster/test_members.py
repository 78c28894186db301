"""cluster.members: who a local cluster is made of and what security it is given."""

from __future__ import annotations

from broker_core.cluster.cluster_file import ClusterFile
from broker_core.cluster.members import broker_argv, secure, single_entries


def test_single_copies_are_numbered_with_consecutive_port_pairs(tmp_path):
    entries = single_entries(2, 20000, tmp_path, "127.0.0.1")
    assert [(e.name, e.addr, e.http, e.data) for e in entries] == [
        ("broker-1", "127.0.0.1:20000", "127.0.0.1:20001", str(tmp_path / "broker-1")),
        ("broker-2", "127.0.0.1:20002", "127.0.0.1:20003", str(tmp_path / "broker-2"))]
    argv = broker_argv(entries[1], "c", "sync", "64M", ["--acl"])
    assert argv[argv.index("--port") + 1] == "20002" and argv[-1] == "--acl"
    assert "--group" not in argv  # a single copy has no group to join


def test_tls_and_the_acl_give_the_brokers_their_flags_and_name_their_files(tmp_path):
    entries = single_entries(1, 20000, tmp_path, "127.0.0.1")
    file = ClusterFile("c", entries, 1, "", "", None)
    plain = secure(tmp_path, file, "127.0.0.1", tls=False, acl=False)
    assert plain.args == [] and file.tls_ca in ("", None) and plain.credentials is None
    both = secure(tmp_path, file, "127.0.0.1", tls=True, acl=True)
    assert both.tls_ca.is_file() and file.tls_ca == str(both.tls_ca)
    assert both.args[both.args.index("--tls-ca") + 1] == str(both.tls_ca)
    assert file.credentials == str(tmp_path / "admin.credentials.toml")
    assert both.args[both.args.index("--admin-token-file") + 1] == file.admin_token
