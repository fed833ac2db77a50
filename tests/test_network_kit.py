"""The kit's whole-network cases (NET-6, NET-8 to NET-11): the reference backend and the correct
one-defect base pass every one of them, in process and through a backend host; each network
one-defect backend is caught by the case meant for it; backends that cannot take part are
NOT_SUPPORTED, never failed; and the tolerance a network's output gets grows with what its
layers may add, not past what a wrong layer changes."""
import numpy as np
import pytest

import loader
import mock_backends
import reference_backend
from conformance import network_builder, network_hostile, network_runs, runner
from conformance.registry import CASES

NEW_CASES = ("net.generated-long-runs", "net.generated-side-outputs", "net.generated-broadcast",
             "net.weights-as-inputs", "net.concurrent-execute", "net.block-mobilenet-v2",
             "net.block-resnet-bottleneck", "net.block-shufflenet", "net.block-transformer",
             "net.damaged-blobs", "net.profiling-fused-layers")
DEFECTS = mock_backends.one_defect_backends()
CAUGHT_BY = {
    "compiled_steps_counted_in_a_byte": "net.generated-long-runs",
    "side_output_kept_internal": "net.generated-side-outputs",
    "compiled_broadcast_left_aligned": "net.generated-broadcast",
    "compiled_weights_cached": "net.weights-as-inputs",
    "compiled_shared_bindings": "net.concurrent-execute",
    "blob_truncation_zero_filled": "net.damaged-blobs",
    "fused_event_names_first_layer": "net.profiling-fused-layers",
}
TIMEOUT = 60


def statuses(path, backend_host="in-process"):
    run = runner.run_cases(path, ",".join(NEW_CASES), timeout=TIMEOUT, backend_host=backend_host)
    return {r.case.id: (r.status, r.message) for r in run.results}


@pytest.mark.parametrize("path", [reference_backend.LIBRARY_PATH,
                                  mock_backends.correct_backends()["plain"]],
                         ids=["reference", "one-defect base"])
def test_correct_backends_pass_every_network_case(path):
    found = statuses(path)
    assert {case: status for case, (status, _) in found.items()} == {c: "PASS" for c in NEW_CASES}, found


def test_the_reference_backend_passes_them_through_a_backend_host_too():
    found = statuses(reference_backend.LIBRARY_PATH, backend_host="process")
    assert {case: status for case, (status, _) in found.items()} == {c: "PASS" for c in NEW_CASES}, found


@pytest.mark.parametrize("stem", sorted(CAUGHT_BY))
def test_each_network_defect_is_caught_by_the_case_meant_for_it(stem):
    defect = DEFECTS[stem]
    case = CASES[CAUGHT_BY[stem]]
    assert case.requirement == defect.requirement
    [result] = runner.run_cases(defect.path, case.id, timeout=TIMEOUT).results
    assert result.status in ("FAIL", "CRASH"), (stem, result.status, result.message)
    assert result.message


def test_what_the_failures_say():
    [result] = runner.run_cases(DEFECTS["compiled_steps_counted_in_a_byte"].path,
                                "net.generated-long-runs", timeout=TIMEOUT).results
    assert "a run of 300 layers" in result.message and "expected" in result.message
    [result] = runner.run_cases(DEFECTS["blob_truncation_zero_filled"].path, "net.damaged-blobs",
                                timeout=TIMEOUT).results
    assert "truncated to" in result.message and "accepted" in result.message
    [result] = runner.run_cases(DEFECTS["compiled_weights_cached"].path, "net.weights-as-inputs",
                                timeout=TIMEOUT).results
    assert "execute 2 of 3" in result.message and "new" in result.message


@pytest.mark.parametrize("stem", ["minor_older", "partial"])
def test_backends_that_cannot_take_part_are_never_failed(stem):
    """A 1.1 backend has no optimizer; the partial mock runs convolutions and three activations
    only, and neither profiles nor serializes."""
    found = statuses(mock_backends.path(stem))
    assert {status for status, _ in found.values()} <= {"PASS", "NOT_SUPPORTED"}, found
    if stem == "minor_older":
        assert all("no optimize_subgraph" in message for _, message in found.values())


class _Everything:
    """A backend stand-in for the network builder that says it runs every layer."""

    def is_layer_supported(self, *args):
        return True


def test_the_tolerance_grows_with_the_layers_but_not_past_a_layer_left_out():
    net = network_builder.chain(_Everything(), 300, (2, 3, 4), 7)
    inputs = network_runs.random_inputs(net, 1)
    (expected, tolerance), = network_runs.expected_outputs(net, inputs).values()
    # each layer adds its own (1e-4 and more), carried through leaky ReLUs and scales
    assert tolerance.min() > 20 * 1e-4 and tolerance.max() < 0.25
    # every offset moves the values by 0.25 or more: a network with one left out is told apart
    data = net.to_dict()
    dropped = next(layer for layer in data["layers"][150:] if layer["type"] == "Addition")
    data["layers"].remove(dropped)
    for layer in data["layers"]:
        layer["inputs"] = [dropped["inputs"][0] if i == dropped["name"] else i
                           for i in layer["inputs"]]
    data["outputs"] = [dict(o, **({"source": dropped["inputs"][0]}
                                  if o.get("source") == dropped["name"] else {}))
                       for o in data["outputs"]]
    short = network_runs.expected_outputs(loader.Network.from_dict(data), inputs)
    (wrong, _), = short.values()
    assert np.all(np.abs(wrong - expected) > tolerance)


def test_the_damaged_copies_of_a_blob():
    blob = bytes(range(200))
    damaged = list(network_hostile._damaged(blob, np.random.default_rng(0)))
    truncated = [d for what, d, refuse in damaged if what.startswith("truncated")]
    extended = [d for what, d, refuse in damaged if what.startswith("extended")]
    flipped = [d for what, d, refuse in damaged if "flipped" in what]
    assert all(len(d) < len(blob) and blob.startswith(d) for d in truncated) and b"" in truncated
    assert blob[:-1] in truncated and blob + blob in extended
    assert len(flipped) == network_hostile.FLIPPED_HEAD + network_hostile.FLIPPED_SPREAD
    assert all(sum(bin(a ^ b).count("1") for a, b in zip(d, blob)) == 1 for d in flipped)
    assert all(refuse for what, _, refuse in damaged if "flipped" not in what)
