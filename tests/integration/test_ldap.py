"""The live directory against a real slapd: layouts, size limits, TLS, failures.

One directory holds all three layouts side by side: groupOfNames teams under
ou=teams, posixGroup teams under ou=groups, and an Active Directory-shaped
subtree under ou=ad. OpenLDAP cannot run AD, so ad.schema (next to this
file) defines the AD attributes and classes billing reads (sAMAccountName,
memberOf, managedBy, user, group) with their real AD OIDs; what the AD
layout depends on (names, DN-valued memberOf and managedBy) is the same.

The job-level tests replace only the Prometheus collection with a fixed
usage frame: what is under test is the directory, read from the real server.
"""

from __future__ import annotations

import email
import hashlib
import logging
from datetime import date
from pathlib import Path

import ldap3
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

import billing.collect.day
from billing.charge.ownership import assign_owners
from billing.cli import main
from billing.collect.usage import ClusterUsage
from billing.config import Config, DirectoryConfig, NamespaceRules
from billing.directory.ldap import read_ldap
from billing.directory.people import DirectoryError
from billing.jobs.run import run_day
from billing.ledger.database import open_ledger
from billing.ledger.read import read_rows
from fixtures.directory import directory_ldif as small_directory_ldif
from fixtures.servers import SlapdServer, free_port
from tests.helpers.config import stub_node_metrics
from tests.helpers.faults import ledger_state

BASE = "dc=example,dc=org"
BIND_DN = f"cn=billing,ou=services,{BASE}"
PASSWORD = "billing-secret"
GENERATED = 1200  # people u0000 ... u1199, besides the named ones
NAMED = ["alice", "bob", "carol", "dave"]
OUS = ["services", "people", "teams", "groups", "ad"]
AD_SCHEMA = Path(__file__).with_name("ad.schema")
DAY = date(2026, 11, 20)
PRICES = {"cpu_core_hour": 0.5, "memory_gib_hour": 0, "gpu_hour": 0}


def entry(dn: str, **attributes: str | list[str]) -> str:
    lines = [f"dn: {dn}"]
    for name, values in attributes.items():
        lines += [f"{name}: {v}" for v in (values if isinstance(values, list) else [values])]
    return "\n".join(lines)


def person_dn(uid: str) -> str:
    return f"uid={uid},ou=people,{BASE}"


def person(uid: str, number: int) -> str:
    return entry(
        person_dn(uid),
        objectClass=["inetOrgPerson", "posixAccount"],
        uid=uid,
        cn=uid.title(),
        sn=uid,
        mail=f"{uid}@example.org",
        uidNumber=str(10000 + number),
        gidNumber="5000",
        homeDirectory=f"/home/{uid}",
    )


def ad_user(account: str, groups: list[str]) -> str:
    return entry(
        f"CN={account.title()} Example,OU=Users,ou=ad,{BASE}",
        objectClass="user",
        cn=f"{account.title()} Example",
        sn="Example",
        sAMAccountName=account,
        displayName=f"{account.title()} Example",
        mail=f"{account}@corp.example.org",
        **({"memberOf": [f"CN={g},OU=Teams,ou=ad,{BASE}" for g in groups]} if groups else {}),
    )


def posix_group(name: str, gid: int, uids: list[str]) -> str:
    return entry(f"cn={name},ou=groups,{BASE}", objectClass="posixGroup", cn=name, gidNumber=str(gid), memberUid=uids)


def directory_ldif() -> str:
    generated = [f"u{i:04d}" for i in range(GENERATED)]
    fleet = [person_dn(u) for u in generated[600:]]
    entries = [
        entry(BASE, objectClass=["dcObject", "organization"], dc="example", o="Example"),
        *[entry(f"ou={ou},{BASE}", objectClass="organizationalUnit", ou=ou) for ou in OUS],
        entry(BIND_DN, objectClass=["organizationalRole", "simpleSecurityObject"], cn="billing", userPassword=PASSWORD),
        *[person(uid, n) for n, uid in enumerate(NAMED + generated)],
        # groupOfNames: alice is on robotics and vision; robotics has two leads; frank has left.
        entry(
            f"cn=robotics,ou=teams,{BASE}",
            objectClass="groupOfNames",
            cn="robotics",
            member=[person_dn("alice"), person_dn("bob")] + [person_dn(u) for u in generated[:600]],
            owner=[person_dn("carol"), "UID=Dave, OU=People, DC=Example, DC=Org"],
        ),
        entry(
            f"cn=vision,ou=teams,{BASE}",
            objectClass="groupOfNames",
            cn="vision",
            member=[person_dn("alice"), person_dn("carol"), person_dn("frank")],
            owner=person_dn("carol"),
        ),
        entry(f"cn=fleet,ou=teams,{BASE}", objectClass="groupOfNames", cn="fleet", member=fleet),
        # posixGroup: bare uids; sys is a system group, not a team.
        posix_group("robotics", 5001, ["alice", "bob"]),
        posix_group("vision", 5002, ["alice", "carol"]),
        posix_group("sys", 100, ["alice"]),
        # Active Directory: membership from the user's memberOf and from the group's member.
        entry(f"OU=Users,ou=ad,{BASE}", objectClass="organizationalUnit", ou="Users"),
        entry(f"OU=Teams,ou=ad,{BASE}", objectClass="organizationalUnit", ou="Teams"),
        ad_user("alice", ["Robotics", "Vision"]),
        ad_user("bob", []),
        ad_user("carol", ["Vision"]),
        entry(
            f"CN=Robotics,OU=Teams,ou=ad,{BASE}",
            objectClass="group",
            cn="Robotics",
            member=f"CN=Bob Example,OU=Users,ou=ad,{BASE}",
            managedBy=f"cn=carol example,ou=users,ou=ad,{BASE}",
        ),
        entry(f"CN=Vision,OU=Teams,ou=ad,{BASE}", objectClass="group", cn="Vision"),
    ]
    return "\n\n".join(entries) + "\n"


LDIF = directory_ldif()


@pytest.fixture
def directory_server(slapd_server):
    """directory_server(sizelimit=500, tls=None) -> slapd holding LDIF, AD subtree included.

    The size limit of 500 caps plain searches and lets paged ones through, as
    on a server set up for the billing account; slapd's own default (also 500)
    caps paged searches too."""

    def start(sizelimit: int | str = 500, **options) -> SlapdServer:
        return slapd_server(LDIF, schemas=[AD_SCHEMA], sizelimit=sizelimit, **options)

    return start


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "ldap-password"
    path.write_text(PASSWORD + "\n")
    return path


def group_of_names(url: str | list[str], password_file: Path, **keys) -> DirectoryConfig:
    return DirectoryConfig(
        url=url,
        bind_dn=BIND_DN,
        bind_password_file=str(password_file),
        people={"base": f"ou=people,{BASE}"},
        teams={"base": f"ou=teams,{BASE}"},
        **keys,
    )


def test_group_of_names_over_ldaps_with_a_server_size_limit_of_500(directory_server, test_ca, password_file):
    server = directory_server(tls=test_ca)
    with ldap3.Connection(server.url, BIND_DN, PASSWORD, auto_bind=True) as plain:  # the limit is real
        plain.search(f"ou=people,{BASE}", "(objectClass=inetOrgPerson)")
        assert (plain.result["description"], len(plain.entries)) == ("sizeLimitExceeded", 500)

    directory = read_ldap(group_of_names(server.ldaps_url, password_file, ca_file=str(test_ca.ca_cert)))

    assert len(directory.people) == len(NAMED) + GENERATED == 1204
    assert len(directory.teams["robotics"].members) == 2 + 600
    assert len(directory.teams["fleet"].members) == 600
    assert directory.teams["vision"].members == ("alice", "carol")  # frank has left
    assert directory.teams["robotics"].leads == ("carol", "dave")
    leads = directory.teams["robotics"].leads
    assert [directory.people[uid].mail for uid in leads] == ["carol@example.org", "dave@example.org"]
    assert directory.teams_of("alice") == ("robotics", "vision")


def test_a_person_on_two_teams_is_charged_half_to_each(directory_server, password_file):
    server = directory_server()
    directory = read_ldap(group_of_names(server.url, password_file))

    ownership = assign_owners(["alice", "bob", "team-vision"], directory, NamespaceRules())

    shares = {(r.namespace, r.team): r.share for r in ownership.itertuples()}
    assert shares == {
        ("alice", "robotics"): 0.5,
        ("alice", "vision"): 0.5,
        ("bob", "robotics"): 1.0,
        ("team-vision", "vision"): 1.0,
    }


def test_a_size_limit_that_also_caps_paged_searches_fails_instead_of_truncating(directory_server, password_file):
    server = directory_server(sizelimit="500")  # verbatim: the paged total is capped at 500 too
    expected = (
        r"searching ou=people,dc=example,dc=org .* failed after 500 entries \(sizeLimitExceeded.*\);"
        " the server lets this account read no more"
    )
    with pytest.raises(DirectoryError, match=expected):
        read_ldap(group_of_names(server.url, password_file))


def test_posix_groups_over_starttls(directory_server, test_ca, password_file):
    server = directory_server(tls=test_ca)
    config = DirectoryConfig(
        url=server.url,
        starttls=True,
        ca_file=str(test_ca.ca_cert),
        bind_dn=BIND_DN,
        bind_password_file=str(password_file),
        people={"base": f"ou=people,{BASE}", "filter": "(objectClass=posixAccount)"},
        teams={
            "base": f"ou=groups,{BASE}",
            "filter": "(&(objectClass=posixGroup)(gidNumber>=5000))",
            "member_attribute": "memberUid",
            "lead_attribute": "",
        },
    )
    directory = read_ldap(config)

    assert sorted(directory.teams) == ["robotics", "vision"]
    assert directory.teams["robotics"].members == ("alice", "bob")
    assert directory.teams_of("alice") == ("robotics", "vision")


def test_active_directory_layout(directory_server, password_file):
    server = directory_server()
    config = DirectoryConfig(
        url=server.url,
        bind_dn=BIND_DN,
        bind_password_file=str(password_file),
        people={
            "base": f"OU=Users,ou=ad,{BASE}",
            "filter": "(objectClass=user)",
            "uid_attribute": "sAMAccountName",
            "name_attribute": "displayName",
            "member_of_attribute": "memberOf",
        },
        teams={"base": f"OU=Teams,ou=ad,{BASE}", "filter": "(objectClass=group)", "lead_attribute": "managedBy"},
    )
    directory = read_ldap(config)

    assert sorted(directory.people) == ["alice", "bob", "carol"]
    assert directory.people["alice"].name == "Alice Example"
    assert directory.teams["Robotics"].members == ("bob", "alice")  # the group's member, then memberOf
    assert directory.teams["Vision"].members == ("alice", "carol")
    assert directory.teams["Robotics"].leads == ("carol",)
    assert directory.people["carol"].mail == "carol@corp.example.org"


def test_names_made_of_filter_syntax_match_nobody(directory_server, password_file):
    server = directory_server()
    directory = read_ldap(group_of_names(server.url, password_file))
    rules = NamespaceRules(team_pattern=r"^team-(?P<team>.+)$", person_pattern=r"^(?P<uid>.+)$")
    hostile = ["a*)(uid=*", "*", "u0*", "team-*", "team-robotics)(cn=*", "alice)(|(uid=*", "alice\\2a"]

    ownership = assign_owners(hostile, directory, rules)

    assert set(ownership["team"]) == {"unallocated"}
    assert ownership["owner"].isna().all()
    assert list(ownership["share"]) == [1.0] * len(hostile)


def test_wrong_password_is_one_clear_sentence(directory_server, tmp_path):
    server = directory_server()
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-password")
    with pytest.raises(DirectoryError) as failure:
        read_ldap(group_of_names(server.url, wrong))
    assert str(failure.value) == (
        f"directory {server.url}: binding as {BIND_DN} failed (wrong bind DN or password: invalidCredentials); "
        f"check bind_dn and bind_password_file {wrong}"
    )


def test_tls_is_validated_against_the_configured_ca(directory_server, test_ca, password_file):
    server = directory_server(tls=test_ca)
    unknown_ca = r"^directory ldaps://127\.0\.0\.1:\d+: connection failed \(TLS failed: certificate verify failed"
    with pytest.raises(DirectoryError, match=unknown_ca) as failure:
        read_ldap(group_of_names(server.ldaps_url, password_file))  # no ca_file: the system CAs do not know the test CA
    assert str(failure.value).endswith(
        "; set ca_file to the CA that signed the server's certificate (the system's CAs did not)")
    localhost = server.ldaps_url.replace("127.0.0.1", "localhost")  # the certificate names both
    assert len(read_ldap(group_of_names(localhost, password_file, ca_file=str(test_ca.ca_cert))).people) == 1204


def test_failover_to_the_next_url(directory_server, password_file, caplog):
    server = directory_server()
    down = f"ldap://127.0.0.1:{free_port()}"
    with caplog.at_level(logging.WARNING):
        directory = read_ldap(group_of_names([down, server.url], password_file))
    assert len(directory.people) == 1204
    assert f"directory {down}: connection failed (Connection refused); trying the next server" in caplog.text


# --- the nightly job with the directory down


@pytest.fixture
def fixed_usage(monkeypatch):
    """10 core-hours in alice's namespace and in team-vision's."""
    usage = pd.DataFrame(
        {"namespace": ["alice", "team-vision"], "resource": ["cpu"] * 2, "gpu_model": [""] * 2,
         "priority_class": [""] * 2, "pool": [""] * 2, "quantity": [10.0] * 2}
    )
    monkeypatch.setattr(billing.collect.day, "collect_cluster", lambda context, *_: ClusterUsage(context.cluster.name, usage, 2, 1, 1.0))
    stub_node_metrics(monkeypatch)


def job_config(tmp_path: Path, directory: DirectoryConfig) -> Config:
    return Config(
        database=f"sqlite:///{tmp_path}/ledger.db",
        output_dir=str(tmp_path / "reports"),
        clusters=[{"name": "jaguar", "prometheus": {"url": "http://prometheus.invalid:9090"}, "prices": PRICES}],
        directory=directory,
    )


def costs(config: Config) -> dict[str, float]:
    return read_rows(open_ledger(config.database), DAY, DAY).groupby("team")["cost"].sum().to_dict()


# alice: 10 core-h x 0.5 split between robotics and vision; team-vision: 10 core-h x 0.5.
EXPECTED = {"robotics": 2.5, "vision": 2.5 + 5.0}


def test_server_down_fails_the_run_and_keeps_the_ledger(directory_server, password_file, tmp_path, fixed_usage):
    server = directory_server()
    config_file = tmp_path / "billing.yaml"
    config_file.write_text(
        "clusters: [{name: jaguar, prometheus: {url: 'http://prometheus.invalid:9090'},"
        " prices: {cpu_core_hour: 0.5, memory_gib_hour: 0, gpu_hour: 0}}]\n"
        f"database: sqlite:///{tmp_path}/ledger.db\noutput_dir: {tmp_path}/reports\n"
        f"directory: {{url: '{server.url}', bind_dn: '{BIND_DN}', bind_password_file: '{password_file}',"
        f" people: {{base: 'ou=people,{BASE}'}}, teams: {{base: 'ou=teams,{BASE}'}}}}\n"
    )
    run = ["run", "--date", str(DAY), "--config", str(config_file)]
    assert CliRunner().invoke(main, run).exit_code == 0
    before = read_rows(open_ledger(f"sqlite:///{tmp_path}/ledger.db"), DAY, DAY)

    server.stop()
    result = CliRunner().invoke(main, run)

    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (f"billing: directory {server.url}: connection failed (Connection refused); "
                                              "the directory is down or directory.url is wrong")
    assert "Traceback" not in result.stderr
    pd.testing.assert_frame_equal(read_rows(open_ledger(f"sqlite:///{tmp_path}/ledger.db"), DAY, DAY), before)


def test_last_known_directory_when_the_server_is_down(directory_server, password_file, tmp_path, fixed_usage, caplog):
    server = directory_server()
    config = job_config(tmp_path, group_of_names(server.url, password_file, on_failure="last_known"))
    assert run_day(config, DAY).directory_warning == ""
    assert costs(config) == pytest.approx(EXPECTED)

    server.stop()
    with caplog.at_level(logging.WARNING):
        summary = run_day(config, DAY)

    assert summary.directory_warning.startswith(f"directory {server.url}: connection failed (Connection refused); ")
    assert any(r.levelno == logging.WARNING and "LAST KNOWN" in r.getMessage() for r in caplog.records)
    assert costs(config) == pytest.approx(EXPECTED)


# --- names as LDAP compares them, and an ambiguous directory refused, on the real server

SMALL = small_directory_ldif(["alice", "bob", "carol"], {"robotics": ["alice", "carol"], "vision": ["bob"]},
                             leads={"robotics": ["alice"], "vision": ["bob"]})
ADMIN, ADMIN_PASSWORD = f"cn=admin,{BASE}", "secret"


@pytest.fixture
def carol_and_alice(monkeypatch):
    """carol 20 core-h, alice 10, team-robotics 4: at 0.5 per core-hour robotics pays 10 + 5 + 2 = 17.00."""
    usage = pd.DataFrame({"namespace": ["alice", "carol", "team-robotics"], "resource": ["cpu"] * 3,
                          "gpu_model": [""] * 3, "priority_class": [""] * 3, "pool": [""] * 3,
                          "quantity": [10.0, 20.0, 4.0]})
    monkeypatch.setattr(billing.collect.day, "collect_cluster", lambda context, *_: ClusterUsage(context.cluster.name, usage, 3, 1, 1.0))
    stub_node_metrics(monkeypatch)


def small_config(tmp_path: Path, url: str, namespaces: dict | None = None, settings: dict | None = None,
                 **directory) -> str:
    (tmp_path / "admin-password").write_text(ADMIN_PASSWORD)
    (tmp_path / "billing.yaml").write_text(yaml.safe_dump({
        "database": f"sqlite:///{tmp_path}/ledger.db", "output_dir": str(tmp_path / "reports"),
        "clusters": [{"name": "jaguar", "prometheus": {"url": "http://prometheus.invalid:9090"}, "prices": PRICES}],
        "directory": {"url": url, "bind_dn": ADMIN, "bind_password_file": str(tmp_path / "admin-password"),
                      "people": {"base": f"ou=people,{BASE}"}, "teams": {"base": f"ou=teams,{BASE}"}, **directory},
        "email": {"enabled": True, "outbox_dir": str(tmp_path / "outbox"), "admins": []},
        "namespaces": namespaces or {},
        **(settings or {}),
    }))
    return str(tmp_path / "billing.yaml")


def run_cli(path: str, command: str = "run"):
    return CliRunner().invoke(main, [command, *(["--date", str(DAY)] if command == "run" else []), "--config", path])


def recipients(tmp_path: Path) -> list[str]:
    return sorted(email.message_from_bytes(f.read_bytes())["To"] for f in (tmp_path / "outbox").glob("*.eml"))


def add_entry(server: SlapdServer, dn: str, classes: list[str], **attributes) -> None:
    with ldap3.Connection(server.url, ADMIN, ADMIN_PASSWORD, auto_bind=True) as admin:
        assert admin.add(dn, classes, attributes), admin.result


AMBIGUOUS = {
    "a second uid alice": (
        [(f"ou=contractors,ou=people,{BASE}", ["organizationalUnit"], {"ou": "contractors"}),
         (f"uid=alice,ou=contractors,ou=people,{BASE}", ["inetOrgPerson"],
          {"uid": "alice", "cn": "Mallory", "sn": "Mallory", "mail": "evil@attacker.example"})],
        f"'uid=alice,ou=people,{BASE}' and 'uid=alice,ou=contractors,ou=people,{BASE}' have the same uid 'alice'"),
    "a second cn=robotics in another OU": (
        [(f"ou=archive,ou=teams,{BASE}", ["organizationalUnit"], {"ou": "archive"}),
         (f"cn=robotics,ou=archive,ou=teams,{BASE}", ["groupOfNames"],
          {"cn": "robotics", "member": f"uid=bob,ou=people,{BASE}", "owner": f"uid=bob,ou=people,{BASE}"})],
        f"'cn=robotics,ou=teams,{BASE}' and 'cn=robotics,ou=archive,ou=teams,{BASE}' have the same team name "
        "'robotics'"),
}


@pytest.mark.parametrize("on_failure", ["fail", "last_known"])
@pytest.mark.parametrize("case", sorted(AMBIGUOUS))
def test_an_ambiguous_directory_is_refused_and_nothing_changes(slapd_server, tmp_path, carol_and_alice, case,
                                                               on_failure):
    server = slapd_server(SMALL)
    path = small_config(tmp_path, server.url, on_failure=on_failure)
    assert run_cli(path).exit_code == 0
    ledger = f"sqlite:///{tmp_path}/ledger.db"
    before = ledger_state(ledger)
    by_team = read_rows(open_ledger(ledger), DAY, DAY).groupby(["team", "namespace"])["cost"].sum().to_dict()
    assert by_team == {("robotics", "alice"): 5.0, ("robotics", "carol"): 10.0, ("robotics", "team-robotics"): 2.0}
    assert recipients(tmp_path) == ["alice@example.org"]  # robotics' lead; vision billed nothing
    for f in (tmp_path / "outbox").glob("*.eml"):
        f.unlink()
    entries, both = AMBIGUOUS[case]
    for dn, classes, attributes in entries:
        add_entry(server, dn, classes, **attributes)

    refused = run_cli(path)
    checked = run_cli(path, "check")

    sentence = (f"the directory is ambiguous: {both} (compared without regard to case), so nobody is billed or "
                "mailed from a guess")
    assert refused.exit_code == 1 and refused.stderr == f"billing: {sentence}\n"
    assert ledger_state(ledger) == before  # carol's 10.00 stays with robotics, computed_at as it was
    assert recipients(tmp_path) == []
    assert checked.exit_code == 1
    [line] = [line for line in checked.stdout.splitlines() if line[6:26].strip() == "directory"]
    assert line.startswith("FAIL") and sentence in line


def test_case_and_escapes_as_ldap_compares_them(slapd_server, tmp_path, carol_and_alice):
    """`uid: Alice` owns namespace alice; robotics names carol by `cn=Carol\\2C Example`, her entry being
    `cn=Carol\\, Example`: robotics still pays 17.00, and the lead summary reaches Alice."""
    ldif = (SMALL.replace(f"uid=alice,ou=people,{BASE}\nobjectClass: inetOrgPerson\nuid: alice",
                          f"uid=Alice,ou=people,{BASE}\nobjectClass: inetOrgPerson\nuid: Alice")
                 .replace(f"member: uid=alice,ou=people,{BASE}", f"member: UID=ALICE, OU=People,{BASE}")
                 .replace(f"dn: uid=carol,ou=people,{BASE}", f"dn: cn=Carol\\, Example,ou=people,{BASE}")
                 .replace("cn: Carol Example", "cn: Carol, Example")
                 .replace(f"member: uid=carol,ou=people,{BASE}", f"member: cn=Carol\\2C Example,ou=people,{BASE}"))
    server = slapd_server(ldif)

    result = run_cli(small_config(tmp_path, server.url))

    assert result.exit_code == 0, result.output
    rows = read_rows(open_ledger(f"sqlite:///{tmp_path}/ledger.db"), DAY, DAY)
    assert rows.fillna({"owner": ""}).groupby(["team", "namespace", "owner"])["cost"].sum().to_dict() == {
        ("robotics", "alice", "Alice"): 5.0, ("robotics", "carol", "carol"): 10.0, ("robotics", "team-robotics", ""): 2.0}
    assert recipients(tmp_path) == ["alice@example.org"]


def test_a_team_name_of_300_characters_is_cut_with_a_hash_not_a_failed_night(slapd_server, tmp_path,
                                                                             carol_and_alice, caplog):
    """The name is the group's description (slapd cannot index a DN that long): robotics' 17.00 is billed to
    the name cut to 253 characters, the last 8 a hash of the whole."""
    long = "robotics-" + "x" * 291
    server = slapd_server(SMALL.replace("cn: vision", "cn: vision\ndescription: vision")
                               .replace("cn: robotics", f"cn: robotics\ndescription: {long}"))
    path = small_config(tmp_path, server.url, teams={"base": f"ou=teams,{BASE}", "name_attribute": "description"},
                        namespaces={"overrides": {"team-robotics": long}})

    with caplog.at_level(logging.WARNING):
        result = run_cli(path)

    assert result.exit_code == 0, result.output
    short = long[:244] + "~" + hashlib.sha256(long.encode()).hexdigest()[:8]
    rows = read_rows(open_ledger(f"sqlite:///{tmp_path}/ledger.db"), DAY, DAY)
    assert rows.groupby("team")["cost"].sum().to_dict() == {short: 17.0}
    assert "has 300 characters, more than the 253 the ledger stores" in caplog.text
    assert recipients(tmp_path) == ["alice@example.org"]


# --- every team and person the config names, looked up in the real directory (robotics, vision; alice, bob, carol);
# a queue's team: tests/integration/test_kueue_prometheus.py, on a real Prometheus

JAGUAR = {"name": "jaguar", "prometheus": {"url": "http://prometheus.invalid:9090"}, "prices": PRICES}
MISNAMED = {
    "a budget's team in capitals": (
        {"budgets": {"monthly": {"ROBOTICS": 100}}},
        "budgets.monthly.ROBOTICS: the directory spells this team 'robotics', not 'ROBOTICS': write it so, or its "
        "costs are kept apart from the rest of the team's"),
    "an override to a team nobody has": (
        {"namespaces": {"overrides": {"kube-system": "platform"}}},
        "namespaces.overrides.kube-system: the directory has no team 'platform' (none is close)"),
    "a pool's team": (
        {"clusters": [{**JAGUAR, "reserved_pools": {"node_label": "label_pool", "teams": {"a": "Vision"}}}]},
        "clusters[0].reserved_pools.teams.a: the directory spells this team 'vision', not 'Vision': write it so, or "
        "its costs are kept apart from the rest of the team's"),
    "an admin misspelt": (
        {"web": {"admins": ["alcie", "bob"]}},
        "web.admins[0]: the directory has no person 'alcie' (the closest: alice)"),
}


@pytest.mark.parametrize("case", sorted(MISNAMED))
def test_a_name_the_directory_does_not_hold_as_spelled_refuses_run_and_check(slapd_server, tmp_path,
                                                                             carol_and_alice, case):
    """`team: visoin` would bill a team nobody leads; `ROBOTICS` beside the directory's `robotics` two teams where
    there is one. Both are configuration errors (exit 2), named before the ledger or any store is touched."""
    server = slapd_server(SMALL)
    assert run_cli(small_config(tmp_path, server.url)).exit_code == 0
    ledger = f"sqlite:///{tmp_path}/ledger.db"
    before = ledger_state(ledger)
    settings, sentence = MISNAMED[case]
    path = small_config(tmp_path, server.url, settings=settings)

    refused = run_cli(path)
    checked = run_cli(path, "check")

    assert (refused.exit_code, refused.stderr) == (2, f"billing: {sentence}\n")
    assert ledger_state(ledger) == before
    assert checked.exit_code == 2, checked.output
    [line] = [line for line in checked.stdout.splitlines() if line[6:26].strip() == "directory"]
    assert line.startswith("FAIL") and sentence in line


def test_the_unallocated_team_and_names_as_spelled_pass(slapd_server, tmp_path, carol_and_alice):
    server = slapd_server(SMALL)
    path = small_config(tmp_path, server.url, settings={
        "namespaces": {"overrides": {"kube-system": "unallocated", "team-robotics": "vision"}},
        "budgets": {"monthly": {"robotics": 100, "unallocated": 10}}, "web": {"admins": ["carol"]}})
    assert run_cli(path).exit_code == 0
    checked = run_cli(path, "check")
    [line] = [line for line in checked.stdout.splitlines() if line[6:26].strip() == "directory"]
    assert line.startswith("ok") and "the 3 teams and people the config names are in it" in line
