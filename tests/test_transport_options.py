"""The transport options as Experiment settings: their attributes, their defaults, the checks that refuse
settings that cannot run, variants of one document, and the shipped comparison experiment."""

from __future__ import annotations

import pytest

from cosim.errors import CosimInputError
from cosim.network.spec import NetworkSpec
from cosim.network.transport import (
    mechanism_attributes,
    run_attributes,
    transport_attributes,
)
from cosim.run import experiments_of
from cosim.spec import from_document, make, to_document


def test_default_options_add_no_attribute():
    """A run that sets no transport option has exactly the attributes it had before the options existed."""
    assert mechanism_attributes() == {}
    assert run_attributes(NetworkSpec(), 7) == transport_attributes("roce") | {"FabricSwitch::EcmpSeed": "7"}


@pytest.mark.parametrize("options,expected", [
    ({"qps_per_connection": 4}, {"HostNic::QueuePairsPerConnection": "4"}),
    ({"ecmp_hash": "five-tuple-qp"}, {"FabricSwitch::EcmpHashFields": "five-tuple-qp"}),
    ({"routing": "pinned"}, {"FabricSwitch::Routing": "pinned"}),
    ({"routing": "flowlet"}, {"FabricSwitch::Routing": "flowlet"}),
    ({"routing": "adaptive"}, {"FabricSwitch::Routing": "adaptive", "HostNic::ReorderTolerant": "true"}),
    ({"routing": "spray"}, {"FabricSwitch::Routing": "spray", "HostNic::ReorderTolerant": "true"}),
    ({"admission": True}, {"HostNic::AdmissionEnabled": "true"}),
    ({"qp_window_bytes": 131072}, {"HostNic::QpWindowBytes": "131072"}),
    ({"ecn_marking": "dequeue"}, {"FabricSwitch::EcnMarkingPoint": "dequeue"}),
])
def test_each_option_sets_its_attributes(options, expected):
    """Every option maps to the ns-3 attributes of its mechanism (per-packet routings also make receivers
    tolerate reordering)."""
    assert mechanism_attributes(**options) == expected
    exp = make("flows", **options)
    assert run_attributes(exp.network, 1).items() >= expected.items()


@pytest.mark.parametrize("fields,field", [
    ({"qp_window_bytes": 8192}, "QpWindowBytes"),
    ({"qp_window_bytes": 70000, "attributes.HostNic::AckIntervalBytes": 100000}, "QpWindowBytes"),
    ({"admission": True, "attributes.HostNic::AdmissionChunkBytes": 10000}, "AdmissionChunkBytes"),
    ({"attributes.FabricSwitch::Routing": "spray"}, "FabricSwitch::Routing"),
    ({"routing": "sideways"}, "network.routing"),
    ({"ecmp_hash": "four-tuple"}, "network.ecmp_hash"),
    ({"qps_per_connection": 0}, "network.qps_per_connection"),
])
def test_settings_that_cannot_run_are_refused_before_running(fields, field):
    """A window no ACK opens, grants that are not whole packets, per-packet routing set as a raw attribute
    without reordering-tolerant receivers, and unknown option values fail with the field named."""
    with pytest.raises(CosimInputError) as exc:
        make("flows", **fields)
    assert field in exc.value.field


def test_spraying_to_go_back_n_receivers_can_be_asked_for_explicitly():
    """Saying HostNic::ReorderTolerant=false keeps go-back-N receivers under spraying (to study the cost)."""
    exp = make("flows", **{"attributes.FabricSwitch::Routing": "spray", "attributes.HostNic::ReorderTolerant": "false"})
    assert run_attributes(exp.network, 1)["HostNic::ReorderTolerant"] == "false"


def test_variants_expand_a_document_into_named_experiments():
    """[[variants]] make one Experiment each, named <name>-<variant>, each the document with its fields;
    the resolved document of each is a plain single run (no variants)."""
    doc = {"name": "cmp", "network": {"transport": "roce", "hosts": 4},
           "variants": [{"name": "dcqcn"},
                        {"name": "pfc-only", "dcqcn": False, "admission": True,
                         "attributes": {"HostNic::AdmissionChannels": 4}},
                        {"name": "ib", "transport": "ib", "network": {"routing": "adaptive"}}]}
    exps = from_document(doc)
    assert [e.name for e in exps] == ["cmp-dcqcn", "cmp-pfc-only", "cmp-ib"]
    assert exps[0].network.dcqcn and not exps[0].network.admission
    assert not exps[1].network.dcqcn and exps[1].network.admission
    assert dict(exps[1].network.attributes) == {"HostNic::AdmissionChannels": "4"}
    assert exps[2].network.transport == "ib" and exps[2].network.routing == "adaptive"
    assert "variants" not in to_document(exps[1])
    assert from_document(to_document(exps[1]))[0] == exps[1]


@pytest.mark.parametrize("variants,field", [
    ([], "variants"),
    ([{"name": "a"}, {"name": "a"}], "variants[1].name"),
    ([{"name": "a", "rooting": "adaptive"}], "variants[0].rooting"),
    ([{"dcqcn": False}], "variants[0].name"),
])
def test_bad_variants_name_the_variant(variants, field):
    """An empty list, a repeated or missing name and a misspelt field are errors that say which variant."""
    with pytest.raises(CosimInputError) as exc:
        from_document({"variants": variants})
    assert exc.value.field == field


def test_shipped_transport_comparison_has_the_three_setups():
    """The shipped experiment compares RoCE + DCQCN, RoCE PFC-only with admission and QP scaling, and
    InfiniBand with adaptive routing, on one training iteration."""
    exps = experiments_of("transport-at-scale")
    assert len(exps) == 3 and len({e.name for e in exps}) == 3
    dcqcn, pfc, ib = exps
    assert dcqcn.network.transport == "roce" and dcqcn.network.dcqcn and not dcqcn.network.admission
    assert pfc.network.transport == "roce" and not pfc.network.dcqcn and pfc.network.admission
    assert pfc.network.qps_per_connection > 1 and pfc.network.ecmp_hash == "five-tuple-qp"
    assert ib.network.transport == "ib" and ib.network.routing == "adaptive"
    assert all(e.is_training and e.workload.iterations == 1 for e in exps)


def test_cosim_run_flags_set_the_transport_options(tmp_path, engine_ns):
    """--routing, --ecmp-hash, --qps-per-connection, --admission, --qp-window-bytes and --ecn-marking reach
    the stored experiment; the run completes with every byte delivered."""
    from click.testing import CliRunner

    from cosim import results
    from cosim.cli.run import run

    out = tmp_path / "t.h5"
    r = CliRunner().invoke(run, ["--pattern", "incast", "--hosts", "4", "--flow-bytes", "64KiB", "--transport", "roce",
                                 "--routing", "spray", "--ecmp-hash", "five-tuple-qp", "--qps-per-connection", "2",
                                 "--admission", "--qp-window-bytes", "64KiB", "--ecn-marking", "dequeue", "-q",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    rec = results.read_results(out)["incast"]
    net = rec.config["experiment"]["network"]
    assert (net["routing"], net["ecmp_hash"], net["qps_per_connection"], net["admission"], net["qp_window_bytes"],
            net["ecn_marking"]) == ("spray", "five-tuple-qp", 2, True, 65536, "dequeue")
    assert rec.summary["delivered_bytes"] == rec.summary["payload_bytes"] == 3 * 65536
