"""What a backend's optimizer hands back is untrusted: counts, indices, pointers and compiled
sub-graphs are checked before use, and every misbehaviour ends in an exception naming the
backend, never a crash. Each backend here is compiled at test time from the network mocks'
skeleton with one misbehaving optimize_subgraph."""
import os

import numpy as np
import pytest

import loader
import mock_backends
from helpers import install_reference
from test_abi import compile_backend, needs_cc
from test_networks import relu_chain

SKELETON = os.path.dirname(os.path.abspath(mock_backends.__file__))

SOURCE = r"""
#define MOCK_BACKEND_ID "VendorOdd"
#define MOCK_NO_BACKEND_FACTORY
#include "subgraph_skeleton.h"

static BackendStatus optimize(const BackendInstance *self, const BackendSubgraph *g,
                              BackendOptimizationViews *views, char *message, size_t size)
{
    uint64_t ids[64];
    uint32_t n = g->num_layers < 64 ? g->num_layers : 64;
    (void)self, (void)message, (void)size;
    for (uint32_t i = 0; i < n; i++)
        ids[i] = g->layers[i]->id;
    (void)ids;
    %s
}

BACKEND_EXPORT void *BackendFactory(void) { return mock_new_optimizing_instance(optimize); }
"""

ALL = "views->add_substitution(views, ids, n, g->inputs, g->num_inputs, g->outputs, g->num_outputs, %s);"

CASES = {
    "null-compiled": (ALL % "NULL") + " return BACKEND_STATUS_OK;",
    "small-compiled": """BackendCompiledSubgraph *c = mock_compiled_relu_new(); c->struct_size = 4;
        """ + (ALL % "c") + " return BACKEND_STATUS_OK;",
    "null-ids": """views->add_substitution(views, NULL, n, g->inputs, g->num_inputs, g->outputs,
        g->num_outputs, mock_compiled_relu_new()); return BACKEND_STATUS_OK;""",
    "absurd-count": """views->add_substitution(views, ids, 1u << 30, g->inputs, g->num_inputs,
        g->outputs, g->num_outputs, mock_compiled_relu_new()); return BACKEND_STATUS_OK;""",
    "tensor-out-of-range": """uint32_t bad = 999; views->add_substitution(views, ids, n, &bad, 1,
        g->outputs, g->num_outputs, mock_compiled_relu_new()); return BACKEND_STATUS_OK;""",
    "compiled-twice": """BackendCompiledSubgraph *c = mock_compiled_relu_new();
        views->add_substitution(views, ids, 1, g->inputs, 1, &g->layers[0]->output_tensors[0], 1, c);
        views->add_substitution(views, ids + 1, n - 1, &g->layers[0]->output_tensors[0], 1,
                                g->outputs, g->num_outputs, c);
        return BACKEND_STATUS_OK;""",
    "error-status": (ALL % "mock_compiled_relu_new()") + """
        snprintf(message, size, "the optimizer gave up"); return BACKEND_STATUS_INTERNAL_ERROR;""",
}

EXPECTED = {
    "null-compiled": (loader.InvalidOptimizationError, "no well-formed compiled sub-graph"),
    "small-compiled": (loader.InvalidOptimizationError, "no well-formed compiled sub-graph"),
    "null-ids": (loader.InvalidOptimizationError, "NULL array"),
    "absurd-count": (loader.InvalidOptimizationError, "the sub-graph has 3 layers"),
    "tensor-out-of-range": (loader.InvalidOptimizationError, r"tensor index\(es\) \[999\]"),
    "compiled-twice": (loader.InvalidOptimizationError, "handed over twice"),
    "error-status": (loader.BackendInternalError, "the optimizer gave up"),
}


@needs_cc
@pytest.mark.parametrize("defect", sorted(CASES))
def test_a_misbehaving_optimizer_is_refused_by_name(backend_dir, defect):
    compile_backend(SOURCE % CASES[defect], backend_dir, "Vendor_Odd_backend.so",
                    "-I", SKELETON, "-Wno-unused-function")
    cls, message = EXPECTED[defect]
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as rt:
        with pytest.raises(cls, match=message) as error:
            rt.load_network(relu_chain())
    assert "VendorOdd" in str(error.value)


@needs_cc
def test_a_failure_without_a_reason_still_falls_back(backend_dir):
    body = """for (uint32_t i = 0; i < n; i++) views->add_failed(views, ids[i], NULL);
        return BACKEND_STATUS_OK;"""
    compile_backend(SOURCE % body, backend_dir, "Vendor_Odd_backend.so", "-I", SKELETON)
    install_reference(backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as rt:
        with rt.load_network(relu_chain(), backends=["VendorOdd", "CpuRef"]) as loaded:
            assert set(loaded.assignments.values()) == {"CpuRef"}
            assert loaded.failed["relu0"] == {"VendorOdd": "no reason given"}
            x = np.array([[-1, 2, -3, 4, 0]], np.float32).repeat(2, axis=0)
            assert np.array_equal(loaded.execute({"x": x})["y"], np.maximum(x, 0))
