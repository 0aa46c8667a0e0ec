"""The `web:` section (billing serve), `reports_url` and `email.personal`: each mistake names its key."""

from __future__ import annotations

import pytest

from billing.config import ConfigError, load_config


def test_defaults_trust_only_loopback_and_send_no_personal_email(write_config):
    config = load_config(write_config())
    assert (config.web.auth, config.web.user_header) == ("header", "X-Forwarded-User")
    assert config.web.trusted_proxies == ["127.0.0.1/32", "::1/128"]
    assert (config.web.admins, config.web.database, config.reports_url) == ([], "", "")
    assert config.email.personal == "off"


def test_a_bare_yaml_off_turns_personal_emails_off(write_config, tmp_path):
    path = write_config()
    path.write_text(path.read_text() + "email:\n  personal: off\n")  # YAML 1.1 reads it as false
    assert load_config(path).email.personal == "off"


def test_ldap_auth_reads_its_session_key_from_a_file(write_config, tmp_path):
    (tmp_path / "key").write_text("x" * 40 + "\n")
    config = load_config(write_config(web={"auth": "ldap", "session_key_file": str(tmp_path / "key"),
                                           "session_lifetime": "2h", "login_window": "10m"}))
    assert config.web.session_key == "x" * 40
    assert (config.web.session_lifetime, config.web.login_window) == (7200, 600)
    assert "x" * 40 not in repr(config) and "session_key" not in config.model_dump()["web"]


def test_a_short_session_key_is_refused_when_read(write_config, monkeypatch):
    """Read by `billing serve` when it starts; `billing report` never reads it."""
    monkeypatch.setenv("SHORT_KEY", "too-short")
    config = load_config(write_config(web={"auth": "ldap", "session_key_env": "SHORT_KEY"}))
    with pytest.raises(ConfigError, match="^web: auth ldap needs a session key of at least 32 characters, "
                                          "SHORT_KEY holds 9$"):
        _ = config.web.session_key


@pytest.mark.parametrize("changes, says", [
    ({"web": {"trusted_proxies": ["10.0.0.0/8", "proxy.local"]}},
     "web.trusted_proxies: 'proxy.local' is not an address or network"),
    ({"web": {"auth": "ldap"}}, "web: auth ldap needs session_key_env or session_key_file"),
    ({"web": {"auth": "kerberos"}}, "web.auth: Input should be 'header' or 'ldap'"),
    ({"web": {"login_attempts": 0}}, "web.login_attempts:"),
    ({"web": {"admin": ["alice"]}}, "web.admin: unknown key"),
    ({"reports_url": "billing.example.org"}, "reports_url: expected an http:// or https:// URL"),
    ({"email": {"personal": "monthly"}}, "email.personal: Input should be 'daily', 'weekly' or 'off'"),
])
def test_mistakes_name_the_key(write_config, monkeypatch, changes, says):
    monkeypatch.setenv("SHORT_KEY", "too-short")
    with pytest.raises(ConfigError) as error:
        load_config(write_config(**changes))
    assert says in str(error.value)
