"""Usage written back through ColdFront's command line, with a stand-in for the command (the real ColdFront is
tests/integration/test_coldfront.py): what it answers, and each way it fails."""

from __future__ import annotations

import sys

import pytest

from billing.config import ColdFrontConfig
from billing.directory.coldfront import ColdFrontError
from billing.publish.coldfront_usage import UsageWritten, write_usage

# a stand-in for `coldfront`: checks what it is asked (shell -c with the usage on stdin), answers after some chatter
STAND_IN = """\
import json, sys
assert sys.argv[1:5] == ["shell", "-v", "0", "-c"], sys.argv
asked = json.load(sys.stdin)
assert asked == {"attribute": "Cloud Usage (EUR)", "usage": {"4": 46.0, "5": 42.0, "9": 1.5}}, asked
print("warming up")
print(json.dumps({"written": [4], "without": [5]}))
"""


def section(*command: str) -> ColdFrontConfig:
    return ColdFrontConfig.model_validate({"url": "https://coldfront.test", "team_attribute": "Kubernetes team",
                                           "account_attribute": "Account", "usage_attribute": "Cloud Usage (EUR)",
                                           "usage_command": list(command)})


def test_the_answer_says_what_was_written_what_lacks_the_attribute_and_what_is_gone():
    done = write_usage(section(sys.executable, "-c", STAND_IN), {4: 46.0, 5: 42.0, 9: 1.5})
    assert done == UsageWritten(written=(4,), without=(5,), gone=(9,))


@pytest.mark.parametrize(("command", "said"), [
    (("/nonexistent/coldfront",), "coldfront.usage_command '/nonexistent/coldfront': no such program; name the "
                                  "command that runs ColdFront's command line where its database is"),
    ((sys.executable, "-c", "import sys; sys.exit('no such table: allocation_allocation')"),
     "failed (status 1): no such table: allocation_allocation"),
    ((sys.executable, "-c", "print('not json')"), "failed (status 0): not json"),
    ((sys.executable, "-c", "print('{\"detail\": \"x\"}')"), 'failed (status 0): {"detail": "x"}'),
])
def test_a_command_that_fails_is_one_sentence(command, said):
    with pytest.raises(ColdFrontError) as failed:
        write_usage(section(*command), {4: 1.0})
    assert str(failed.value).endswith(said)
