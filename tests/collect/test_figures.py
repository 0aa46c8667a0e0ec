"""The one gate of figures read from a store (billing/collect/figures.py), and that no collector reads a sample value
any other way."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from billing.collect import figures
from billing.collect.figures import ALLOCATABLE, LENDING_LIMIT, NOMINAL_QUOTA, REQUESTS, ImpossibleFigure, figure

COLLECT = Path(figures.__file__).parent
GPU = {"namespace": "alice", "pod": "train", "resource": "nvidia_com_gpu"}


@pytest.mark.parametrize(("value", "shown"), [("NaN", "NaN"), ("+Inf", "+Inf"), ("-Inf", "-Inf"), ("-1", "-1"),
                                              ("1e13", "1e+13")])
def test_an_impossible_request_is_refused_naming_series_labels_value_and_fix(value, shown):
    with pytest.raises(ImpossibleFigure) as refused:
        figure(value, REQUESTS, GPU, "jaguar")
    assert str(refused.value.on(__import__("datetime").date(2026, 11, 20))) == (
        f'cluster jaguar on 2026-11-20: kube_pod_container_resource_requests{{namespace="alice", pod="train", '
        f'resource="nvidia_com_gpu"}} is {shown}, which a pod\'s request (docs/spec.md rule 3: its containers\', init '
        "containers', overhead or kube-scheduler's figure) cannot be (a finite number from 0 to 100000); correct the "
        "pod's spec or kube-state-metrics' export of it, then run the day again; nothing was billed")


def test_the_bound_is_per_unit_and_scales_with_the_instants_summed():
    assert figure("8", REQUESTS, GPU, "jaguar") == 8.0
    assert figure("1e5", REQUESTS, GPU, "jaguar") == 1e5  # the bound itself is possible
    assert figure(str(2**40), REQUESTS, {"resource": "memory"}, "jaguar") == 2**40  # a TiB of memory: bytes
    with pytest.raises(ImpossibleFigure, match="is 200000 summed over 1 instants"):
        figure("200000", ALLOCATABLE, {"resource": "cpu"}, "jaguar", times=1.0000001)
    assert figure("3.6e7", ALLOCATABLE, {"resource": "cpu"}, "jaguar", times=360) == 3.6e7  # 1e5 cores x 360
    assert figure("1e6", NOMINAL_QUOTA, {"resource": "nvidia.com/gpu"}, "jaguar") == 1e6  # a cluster's, not a pod's


def test_kueues_infinite_lending_limit_is_unset_and_its_other_impossible_figures_are_refused():
    assert figure("+Inf", LENDING_LIMIT, {"resource": "cpu"}, "jaguar") == math.inf
    for value in ("NaN", "-Inf", "-4"):
        with pytest.raises(ImpossibleFigure, match="kueue_cluster_queue_lending_limit"):
            figure(value, LENDING_LIMIT, {"resource": "cpu"}, "jaguar")
    with pytest.raises(ImpossibleFigure, match="nominal quota"):
        figure("+Inf", NOMINAL_QUOTA, {"resource": "cpu"}, "jaguar")


def _reads_a_value(call: ast.Call) -> bool:
    """float(...) or int(...) of something an answer holds: a series' "value"/"values", or a name a loop over them
    binds (value, v)."""
    if not (isinstance(call.func, ast.Name) and call.func.id in ("float", "int") and call.args):
        return False
    if isinstance(call.args[0], ast.Call) and ast.unparse(call.args[0].func) == "figure":
        return False  # a count the gate passed, made whole
    text = ast.unparse(call.args[0])
    return any(word in text for word in ("'value'", "'values'")) or text in ("value", "v")


def test_no_collector_reads_a_sample_value_but_through_the_gate():
    """float() of an answer's value anywhere in billing/collect/ but figures.py (the gate) and prometheus.py's check
    that every value of an answer is a number at all (it keeps none) is a read that skipped the gate."""
    skipped = []
    for path in sorted(COLLECT.glob("*.py")):
        if path.name in ("figures.py", "invoices.py"):  # invoices: a provider's CSV, no store
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and _reads_a_value(node):
                skipped.append(f"{path.name} {ast.unparse(node)}")
    assert skipped == ["prometheus.py float(value)"]


def test_the_scan_finds_a_read_that_skips_the_gate():
    found = [node for node in ast.walk(ast.parse('rows = [float(series["value"][1]) for series in answer]'))
             if isinstance(node, ast.Call) and _reads_a_value(node)]
    assert len(found) == 1
