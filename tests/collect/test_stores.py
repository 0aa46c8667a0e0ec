"""billing.collect.stores: which engine answers, and under which names a scrape left the exporters' labels."""

import pytest

from billing.collect.stores import FamilyLabels, ScrapeLabels, engine_of, renames_query, scrape_labels

GO = {"goVersion": "go1.23.4"}
VM = {"X-Server-Hostname": "vm-0"}  # every VictoriaMetrics answer has it


@pytest.mark.parametrize("buildinfo, headers, name, metricsql, closed", [
    ({"version": "2.42.0+ds", "revision": "x", **GO}, {}, "Prometheus 2.42.0+ds", False, True),
    ({"version": "0.34.1", **GO}, {}, "Thanos Query 0.34.1", False, True),  # Prometheus 2's engine
    ({"version": "3.1.0", **GO}, {}, "Prometheus 3.1.0", False, False),  # (t - 5m, t]: a sample 5 minutes old is gone
    ({}, VM, "VictoriaMetrics", True, False),  # VictoriaMetrics 1.79 answers success with empty data
    ({"version": "2.24.0"}, {}, "VictoriaMetrics", True, False),  # later ones emulate Prometheus 2.24, without Go
    ({}, {}, "an unknown store (asked as Prometheus 2)", False, True),  # no such page
])
def test_the_engine_comes_from_the_build_information(buildinfo, headers, name, metricsql, closed):
    engine = engine_of(buildinfo, headers)
    assert (engine.name, engine.metricsql, engine.closed_lookback) == (name, metricsql, closed)


def test_prometheus_2_reads_bare_selectors_and_metricsql_says_the_lookback():
    prometheus, victoria = engine_of({"version": "2.42.0", **GO}), engine_of({}, VM)
    assert prometheus.latest("up") == "up"
    assert prometheus.sample_time("up") == "timestamp(up)"
    # 300,001 ms over MetricsQL's (t - d, t] is [t - 5 min, t] at millisecond precision
    assert victoria.latest("up") == "default_rollup(up[300001ms])"  # the rollup that keeps staleness markers
    assert victoria.sample_time("up") == "tlast_over_time(up[300001ms]) and default_rollup(up[300001ms])"


def test_plain_labels_are_what_plain_leaves_of_a_series():
    moved = FamilyLabels(namespace="exported_namespace", node="exported_node")
    stored = {"namespace": "monitoring", "exported_namespace": "alice", "node": "n0", "uid": "u"}
    assert moved.plain_labels(stored) == {**stored, "namespace": "alice"}  # no exported_node: its node stays
    assert FamilyLabels().plain_labels(stored) == stored


def test_plain_gives_the_exporters_labels_their_plain_names_back():
    assert FamilyLabels().plain("x") == "x"
    moved = FamilyLabels(namespace="exported_namespace", node="exported_node")
    assert moved.renamed() == {"namespace": "exported_namespace", "node": "exported_node"}
    assert moved.plain("x") == ('label_replace(label_replace(x, "namespace", "$1", "exported_namespace", "(.+)"), '
                                '"node", "$1", "exported_node", "(.+)")')


def test_renames_are_read_per_family_and_label():
    query = renames_query('cluster="jaguar"')
    # 4 families x 4 labels, whether kube-scheduler's series are there, whether GPUs are attributed through DRA,
    # how many pods kube-state-metrics lists
    assert query.count("label_replace(count(") == 19
    assert ('label_replace(count({__name__="kube_pod_status_phase", phase="Running", cluster="jaguar"}), "found", '
            '"kube-state-metrics/pods", "", "")') in query
    assert ('count(default_rollup({__name__="kube_pod_status_phase", phase="Running", cluster="jaguar"}[300001ms]))'
            in renames_query('cluster="jaguar"', engine_of({}, {"X-Server-Hostname": "vm"})))
    assert ('label_replace(count({__name__="kube_pod_resource_request", cluster="jaguar"}), "found", '
            '"kube-scheduler/present", "", "")') in query
    assert '{__name__=~"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_PROF_GR_ENGINE_ACTIVE", exported_pod!="", cluster="jaguar"}' in query
    found = [{"metric": {"found": f"kube-state-metrics/{label}"}, "values": []} for label in ("namespace", "node")]
    found.append({"metric": {"found": "DCGM/pod"}, "values": []})
    found.append({"metric": {"found": "kube-state-metrics/pods"}, "values": [[0, "1200"]]})  # a count, no label
    labels = scrape_labels(found)
    assert labels.kube_state_metrics == FamilyLabels(namespace="exported_namespace", node="exported_node")
    assert labels.dcgm == FamilyLabels(pod="exported_pod")
    assert labels.cadvisor == FamilyLabels()
    assert scrape_labels([]) == ScrapeLabels()


def test_the_configured_label_names_apply_to_every_family_without_asking():
    labels = scrape_labels([{"metric": {"found": "DCGM/pod"}}], override={"namespace": "exported_namespace",
                                                                          "pod": "pod", "container": "container",
                                                                          "node": "node"})
    assert labels.kube_state_metrics == labels.dcgm == labels.cadvisor == labels.scheduler == FamilyLabels(
        namespace="exported_namespace")
