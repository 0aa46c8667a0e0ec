"""The directory section of the config file: the keys this branch added."""

from __future__ import annotations

import re

import pytest

from billing.config import ConfigError, load_config

LDAP = "ldap://ldap.example.org"


def test_defaults_fail_on_an_outage_and_read_one_url(write_config):
    directory = load_config(write_config(directory={"url": "ldaps://ldap.example.org"})).directory
    assert directory.urls == ["ldaps://ldap.example.org"]
    assert directory.on_failure == "fail"
    assert directory.starttls is False
    assert directory.people.member_of_attribute == ""


def test_a_list_of_urls_is_a_failover_list_and_durations_parse(write_config):
    directory = load_config(
        write_config(
            directory={
                "url": ["ldap://ldap1.example.org", "ldap://ldap2.example.org"],
                "starttls": True,
                "connect_timeout": "3s",
                "timeout": "1m",
                "on_failure": "last_known",
            },
        )
    ).directory
    assert directory.urls == ["ldap://ldap1.example.org", "ldap://ldap2.example.org"]
    assert (directory.connect_timeout, directory.timeout) == (3.0, 60.0)
    assert directory.on_failure == "last_known"


@pytest.mark.parametrize(
    ("directory", "message"),
    [
        ({"url": "ldaps://ldap.example.org", "starttls": True}, "url 'ldaps://ldap.example.org' is ldaps://"),
        ({"url": ["ldap://a.example.org", "b.example.org"]}, "directory: url 'b.example.org' must start with ldap://"),
        ({"url": LDAP, "on_failure": "ignore"}, "directory.on_failure: Input should be 'fail' or 'last_known'"),
        ({"url": LDAP, "ca_file": "/nonexistent/ca.pem"}, "directory: ca_file /nonexistent/ca.pem cannot be read"),
        ({"url": LDAP, "people": {"memberof": "x"}}, "directory.people.memberof: unknown key"),
    ],
)
def test_mistakes_name_the_key(write_config, directory, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(write_config(directory=directory))


def test_a_ca_file_that_holds_no_certificate_is_a_config_error(tmp_path, write_config):
    garbage = tmp_path / "ca.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=f"directory: ca_file {garbage} holds no usable PEM certificate"):
        load_config(write_config(directory={"url": "ldaps://ldap.example.org", "ca_file": str(garbage)}))
