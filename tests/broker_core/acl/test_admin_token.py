"""The admin endpoints' token file (acl.admin_token): made owner-only and kept, refused
when others may read it or it is empty, each in one line."""

import pytest

from broker_core.acl import admin_token


def test_a_token_is_made_once_owner_only_and_read_back(tmp_path):
    path = admin_token.make(tmp_path / "admin.token")
    assert path.stat().st_mode & 0o777 == 0o600
    token = admin_token.load(path)
    assert len(token) >= 32
    assert admin_token.load(admin_token.make(path)) == token  # kept: brokers hold it


@pytest.mark.parametrize(("mode", "text", "message"), [
    (0o644, "t0ken\n", "readable by others (-rw-r--r--): chmod 600"),
    (0o600, " \n", "empty"),
])  # fmt: skip
def test_a_token_file_others_may_read_or_empty_is_refused(tmp_path, mode, text, message):
    path = tmp_path / "admin.token"
    path.write_text(text)
    path.chmod(mode)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        admin_token.load(path)
    with pytest.raises(ValueError, match="no-such: No such file"):
        admin_token.load(tmp_path / "no-such")
