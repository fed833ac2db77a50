"""The kit's cases of Backend API 1.3: which backends get them, how they judge (tolerances, exact
data movement, infinities), that their generated shapes are fixed and valid, and that a case id
selects that case alone. The one-defect backends of 1.3 and the correct ones are run in
test_one_defect.py."""
import numpy as np
import pytest

import mock_backends
from conformance import cases, families, runner
from conformance.layer_runs import compare, inputs_for, spec
from conformance.registry import LayerMismatch
from conformance.tolerances import tolerance

FAMILIES_13 = [name for name in families.FAMILIES
               if cases.CASES[f"layers.generated-{name}"].requirement == "LAYER-3"]


def test_every_generated_case_is_valid_fixed_and_named_once():
    from loader.layers import prepare
    ids = set()
    for family in FAMILIES_13:
        built = families.FAMILIES[family]()
        assert built == families.FAMILIES[family](), f"{family}: the shapes must not vary"
        for data in built:
            prepare(data["layer"], [tuple(s) for s in data["inputs"]], data.get("descriptor"))
            assert data["id"] not in ids
            ids.add(data["id"])
    assert len(ids) > 1000


def test_the_sweeps_reach_what_1_3_added():
    specs = [d for family in FAMILIES_13 for d in families.specs(family)]

    def having(layer, **wanted):
        return [d for d in specs if d["layer"] == layer and all(
            (d.get("descriptor") or {}).get(k) == v for k, v in wanted.items())]
    ranks = {(len(d["inputs"][0]), len(d["inputs"][1])) for d in having("Subtraction")}
    assert ranks == {(a, b) for a in range(1, 7) for b in range(1, 7)}
    assert {len(d["inputs"][0]) for d in having("Transpose")} == set(range(1, 7))
    for mode in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
        assert having("Resize", mode="nearest", nearest_mode=mode)
    assert {(d.get("descriptor") or {}).get("coordinate_transformation") for d in having("Resize")} \
        >= {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
            "asymmetric", "tf_half_pixel_for_nn"}
    assert having("Pooling2d", ceil_mode=True) and having("Pooling2d", count_include_pad=True)
    assert having("Pooling2d", pool="l2") and having("Softmax", log=True)
    assert any(d["descriptor"]["axis"] < 0 for d in having("Concatenation"))
    assert any(min(d["descriptor"]["step"]) < 0 for d in having("Slice") if d.get("descriptor"))
    assert any(min(d["descriptor"]["pads"]) < 0 for d in having("Pad"))
    for function in ("mean", "sum", "max", "min", "prod", "l1", "l2", "sum_square", "log_sum_exp"):
        assert having("Reduce", function=function, keep_dims=True)
        assert having("Reduce", function=function, keep_dims=False)
    grouped = having("Convolution2d")
    assert any(d["descriptor"]["groups"] == d["inputs"][0][3] for d in grouped)  # depthwise
    assert any(len(d["inputs"][0]) == 1 for d in having("MatMul"))


def test_a_nearest_coordinate_on_a_rounding_boundary_is_left_out():
    from conformance.generated_spatial import _stable_nearest
    # 7 -> 3, half_pixel: output 1 lies at exactly 3.0, which a float32 scale makes 2.9999999
    assert not _stable_nearest(7, 3, "half_pixel", "floor")
    assert _stable_nearest(7, 3, "half_pixel", "round_prefer_floor")
    assert _stable_nearest(4, 8, "asymmetric", "floor")  # the scale 2 is exact in float32


def test_data_movement_is_exact_and_sums_grow_their_tolerance_with_their_length():
    x = np.ones((3, 4), np.float32)
    moved = spec("t", 0, "Transpose", [[3, 4]])
    assert not tolerance(moved, [x], x.T.astype(np.float64)).any()
    short, long = (spec("m", k, "MatMul", [[1, k], [k, 1]]) for k in (4, 4096))
    tol = [tolerance(d, inputs_for(d), np.zeros((1, 1)))[0, 0] for d in (short, long)]
    assert tol[1] > 10 * tol[0]
    product = spec("r", 0, "Reduce", [[64]], {"function": "prod"})
    assert tolerance(product, [np.ones(64, np.float32)], np.ones(1))[0] > 64 * 2**-24


def test_an_infinity_of_the_reference_must_come_out_as_that_infinity():
    data = spec("u", 0, "ElementwiseUnary", [[2]], {"function": "reciprocal"}, "signed-zeros")
    inputs = [np.array([0.0, -0.0], np.float32)]
    compare(data, inputs, np.array([np.inf, -np.inf], np.float32))
    with pytest.raises(LayerMismatch, match="not the infinity of the reference"):
        compare(data, inputs, np.array([np.inf, np.finfo(np.float32).min], np.float32))
    with pytest.raises(LayerMismatch):
        compare(data, inputs, np.array([np.inf, np.inf], np.float32))


def test_a_result_past_float32s_range_may_be_infinite():
    data = spec("u", 1, "ElementwiseUnary", [[1]], {"function": "exp"})
    compare(data, [np.array([100.0], np.float32)], np.array([np.inf], np.float32))


def test_a_case_id_selects_that_case_alone_and_a_substring_still_selects_many():
    assert [c.id for c in runner.select_cases("memory.Transpose")] == ["memory.Transpose"]
    assert len(runner.select_cases("memory.Transpose*")) == 2
    for case_id in cases.CASES:
        assert [c.id for c in runner.select_cases(case_id)] == [case_id]


def test_a_backend_built_against_1_2_is_never_given_what_1_3_added():
    run = runner.run_cases(mock_backends.path("minor_1_2_says_yes"),
                           "layers.generated-unary,layers.generated-slice,layers.slice-clamped,"
                           "layers.softmax-log,raw.rank-beyond-six,raw.descriptor-values,"
                           "raw.older-descriptor-sizes", timeout=10.0)
    outcome = {r.case.id: (r.status, r.message) for r in run.results}
    assert {status for status, _ in outcome.values()} == {"NOT_SUPPORTED"}, outcome
    assert "Backend API 1.2" in outcome["layers.generated-unary"][1]
    assert "needs 1.3" in outcome["layers.softmax-log"][1]
    assert "1.2" in outcome["raw.rank-beyond-six"][1]


def test_a_backend_that_claims_none_of_1_3_is_not_failed_for_it():
    run = runner.run_cases(mock_backends.correct_backends()["subset"],
                           "layers.generated-unary,layers.generated-resize,"
                           "raw.rank-beyond-six,raw.output-follows-descriptor", timeout=10.0)
    outcome = {r.case.id: r.status for r in run.results}
    assert outcome == {"layers.generated-unary": "NOT_SUPPORTED",
                       "layers.generated-resize": "NOT_SUPPORTED",
                       "raw.rank-beyond-six": "NOT_SUPPORTED",
                       "raw.output-follows-descriptor": "NOT_SUPPORTED"}
