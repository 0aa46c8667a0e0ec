import pytest

from billing.charge.ownership import assign_owners, owners_of, unallocated_reason
from billing.config import NamespaceRules
from billing.directory.people import Directory, Person, Team

DIRECTORY = Directory(
    people={
        "alice": Person("alice", "Alice", "alice@example.org"),
        "bob": Person("bob", "Bob", "bob@example.org"),
        "carol": Person("carol", "Carol", "carol@example.org"),
        "team-x": Person("team-x", "A person whose uid looks like a team", ""),
    },
    teams={
        "robotics": Team("robotics", members=("alice", "bob"), leads=("alice",)),
        "vision": Team("vision", members=("bob",), leads=()),
        "nlp": Team("nlp", members=("bob",), leads=()),
    },
)
RULES = NamespaceRules(overrides={"kube-system": "platform", "team-robotics": "vision"})


@pytest.mark.parametrize(
    "namespace, expected",
    [
        # rule 1: overrides win, even over a matching team pattern; the team need not exist
        ("kube-system", [("platform", None, 1.0)]),
        ("team-robotics", [("vision", None, 1.0)]),
        # rule 2: team pattern naming a directory team
        ("team-nlp", [("nlp", None, 1.0)]),
        # rule 2 does not apply to an unknown team, so rule 3 may: a person whose uid matches
        ("team-x", [("unallocated", "team-x", 1.0)]),
        # rule 3: a person on one team, on three teams (equal split), on none
        ("alice", [("robotics", "alice", 1.0)]),
        ("bob", [("nlp", "bob", 1 / 3), ("robotics", "bob", 1 / 3), ("vision", "bob", 1 / 3)]),
        ("carol", [("unallocated", "carol", 1.0)]),
        # rule 4: nobody
        ("team-ghost", [("unallocated", None, 1.0)]),
        ("dave", [("unallocated", None, 1.0)]),
        ("Weird_NS", [("unallocated", None, 1.0)]),
        ('a*)(uid=*', [("unallocated", None, 1.0)]),
    ],
)
def test_rule_7(namespace, expected):
    assert owners_of(namespace, DIRECTORY, RULES) == expected


def test_custom_unallocated_team_and_patterns():
    rules = NamespaceRules(team_pattern=r"^(?P<team>[a-z]+)-shared$", person_pattern=r"^u-(?P<uid>.+)$",
                           unallocated_team="lost-and-found")
    assert owners_of("vision-shared", DIRECTORY, rules) == [("vision", None, 1.0)]
    assert owners_of("u-alice", DIRECTORY, rules) == [("robotics", "alice", 1.0)]
    assert owners_of("alice", DIRECTORY, rules) == [("lost-and-found", None, 1.0)]


def test_shares_of_every_namespace_add_up_to_one():
    namespaces = ["kube-system", "team-nlp", "alice", "bob", "carol", "dave", "bob"]
    frame = assign_owners(namespaces, DIRECTORY, RULES)
    assert sorted(frame["namespace"].unique()) == sorted(set(namespaces))
    assert frame.groupby("namespace")["share"].sum().tolist() == pytest.approx([1.0] * 6)
    assert len(frame) == 8  # bob's namespace has three rows


def test_uids_and_team_names_match_the_directory_without_regard_to_case():
    """LDAP's uid and cn are case-insensitive: `uid: Alice` owns namespace alice, `cn: Robotics` is team-robotics,
    an override naming ROBOTICS is that team; each is written as the directory spells it."""
    directory = Directory(
        people={"Alice": Person("Alice", "Alice", "alice@example.org")},
        teams={"Robotics": Team("Robotics", members=("Alice",), leads=("Alice",))},
    )
    rules = NamespaceRules(overrides={"ml-infra": "ROBOTICS", "kube-system": "Platform"})
    assert owners_of("alice", directory, rules) == [("Robotics", "Alice", 1.0)]
    assert owners_of("team-robotics", directory, rules) == [("Robotics", None, 1.0)]
    assert owners_of("ml-infra", directory, rules) == [("Robotics", None, 1.0)]
    assert owners_of("kube-system", directory, rules) == [("Platform", None, 1.0)]  # not in the directory: as written


@pytest.mark.parametrize(
    "namespace, owner, reason",
    [
        # the ledger recorded an owner: rule 3 found the person, who is on no team
        ("carol", "carol", "person carol is on no team"),
        ("team-x", "team-x", "person team-x is on no team"),
        # no owner recorded: which name rule found nothing in the directory
        ("team-ghost", None, "no team 'ghost' in the directory"),
        ("dave", None, "no person 'dave' in the directory"),
        ("Weird_NS", None, "the name matches neither a team nor a person pattern"),
    ],
)
def test_an_unallocated_namespace_says_why(namespace, owner, reason):
    assert owners_of(namespace, DIRECTORY, RULES)[0][0] == "unallocated"
    assert unallocated_reason(namespace, owner, DIRECTORY, RULES) == reason


def test_an_override_to_the_unallocated_team_says_so():
    rules = NamespaceRules(overrides={"scratch": "unallocated"})
    assert unallocated_reason("scratch", None, DIRECTORY, rules) == "namespaces.overrides charges it here"
