"""The twin run: tests of backend objects, layer errors, networks, profiling and compiled
networks, written against backends in this process, run again here against the same backends
in backend host processes (``Runtime(backend_host="process")``). The contract (CONTRACT-models
16.1) is that nothing a user sees changes: results, errors and their messages, reprs.

Left out: tests of what only exists in process (mapped libraries, the kernels' threads, objects
outliving their runtime, another runtime's memory manager fitting, fork) and tests that build
their own runtimes."""
import pytest

import loader
import test_backend_objects as objects
import test_compiled_network as compiled
import test_layer_errors as layer_errors
import test_network_profiling as profiling
import test_networks as networks
from helpers import install_mock, install_reference

# The mocks each source module's runtime fixture installs beside the reference backend.
MOCKS = {"test_backend_objects": [], "test_networks": ["partial"],
         "test_network_profiling": ["partial", "profiling_bad_events"],
         "test_compiled_network": ["partial"]}


@pytest.fixture
def runtime(request, backend_dir):
    install_reference(backend_dir)
    for stem in MOCKS.get(request.function.__module__, []):
        install_mock(stem, backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir), backend_host="process",
                        call_timeout=60) as rt:
        yield rt


@pytest.fixture(scope="module")
def hosted_reference(tmp_path_factory):
    directory = tmp_path_factory.mktemp("reference")
    install_reference(directory)
    with loader.Runtime(dynamic_backends_path=str(directory), backend_host="process",
                        call_timeout=60) as rt:
        yield rt


@pytest.fixture
def backend(hosted_reference):
    backend = hosted_reference.create_backend("CpuRef")
    yield backend
    backend.close()


def test_the_twins_run_in_host_processes(backend, runtime):
    assert backend.host.pid is not None and runtime.report["settings"]["backend_host"] == "process"


exported = compiled.exported

for _module, _names in (
    (objects, ["test_reference_capabilities_and_features", "test_support_answers_with_a_reason",
               "test_the_custom_allocator_question",
               "test_objects_outlive_the_instance_that_created_them",
               "test_a_closed_backend_refuses_calls", "test_closed_objects_refuse_calls",
               "test_each_object_shows_its_backend_and_state",
               "test_network_ids_are_64_bit_unsigned_integers",
               "test_memory_manager_acquire_and_release_balance",
               "test_backend_context_notifications", "test_execute_from_many_threads",
               "test_closing_a_backend_while_calls_run_is_safe"]),
    (layer_errors, [name for name in dir(layer_errors) if name.startswith("test_")]),
    (networks, ["test_a_network_on_the_reference_backend_gives_numpys_result",
                "test_a_network_split_across_the_partial_backend_and_cpuref",
                "test_a_failed_layer_falls_back_to_the_next_backend",
                "test_a_layer_no_backend_takes_names_every_reason",
                "test_unload_is_idempotent_and_execute_after_it_says_so",
                "test_network_ids_are_distinct_and_contexts_balance",
                "test_wrong_inputs_at_execute_raise_network_error",
                "test_the_reference_backend_runs_its_whole_subgraph_as_one_program",
                "test_a_program_keeps_an_intermediate_that_is_also_a_network_output",
                "test_a_long_chain_in_one_program_matches_numpy",
                "test_execute_from_several_threads",
                "test_outputs_may_expose_an_input_and_one_tensor_twice",
                "test_memory_managers_are_acquired_while_loaded",
                "test_every_context_hears_each_network_load_and_unload_in_order"]),
    (profiling, [name for name in dir(profiling) if name.startswith("test_")]),
    (compiled, ["test_a_compiled_network_loads_again_with_identical_results",
                "test_a_backend_that_cannot_serialize_cannot_export",
                "test_a_version_mismatch_is_refused",
                "test_bytes_the_backend_refuses_are_a_clear_error",
                "test_a_truncated_or_corrupt_file_is_refused",
                "test_a_backend_that_cannot_load_compiled_bytes_is_refused",
                "test_a_plan_that_does_not_cover_the_network_is_refused"]),
):
    for _name in _names:
        globals()[_name] = getattr(_module, _name)
del _module, _names, _name
