"""What pods bound to a node held before they ran, in the words of the night's log and `billing check`."""

import pandas as pd

from billing.charge.bound_pending import bill_sentences, held_by_resource


def test_the_log_says_each_clusters_share_of_its_bill_and_whether_it_was_charged():
    """jaguar's bill is 100.00, of which 4 GPU-h held while Pending cost 10.00 (3 of them in ImagePullBackOff); ibis'
    held 2 core-h costing 0.04 of a bill of 8.00, shown only."""
    held = pd.DataFrame({"cluster": ["jaguar", "jaguar", "ibis"], "resource": ["gpu", "gpu", "cpu"],
                         "reason": ["ImagePullBackOff", "ContainerCreating", ""], "quantity": [3.0, 1.0, 2.0],
                         "cost": [7.5, 2.5, 0.04], "charged": [True, True, False]})
    rows = pd.DataFrame({"cluster": ["jaguar", "ibis"], "cost": [100.0, 8.0]})
    assert bill_sentences(held, rows) == [
        ("ibis", "2.00 core-h held by pods bound to a node, not yet Running, 0.5% of the bill (shown, not charged)"),
        ("jaguar", "4.00 GPU-h held by pods bound to a node, not yet Running, 10.0% of the bill; 3.00 of them in "
                   "ImagePullBackOff"),
    ]


def test_billing_check_says_the_share_of_what_running_pods_requested():
    """Running pods requested 50 GPU-h (reason None); pods bound to a node held 5 more, 4 in ErrImagePull."""
    hours = pd.DataFrame({"resource": ["gpu", "gpu", "gpu"], "reason": [None, "ErrImagePull", "ContainerCreating"],
                          "quantity": [50.0, 4.0, 1.0]})
    assert held_by_resource(hours) == ["gpu 5.00 GPU-h held by pods bound to a node, not yet Running, 10.0% of what "
                                       "Running pods requested; 4.00 of them in ErrImagePull"]
    assert held_by_resource(hours[hours["reason"].isna()]) == []
