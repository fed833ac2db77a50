"""PERF-1 holds up on a busy machine: the backend and the reference are timed in interleaved
rounds and a layer is called slow only when it is slow in every round; a warning says how many
CPUs each kept busy. The scaffold refuses what Backend API 1.3 added that it does not
implement (test_conformance.py runs the kit on it: conformant, without a warning)."""
import shutil
import subprocess

import pytest

from conformance import speed_cases
from conformance.speed_cases import ROUNDS, SLOWER, Timing, compare


def scripted(seconds, cpus=1.0, log=None, name=""):
    """A timer that returns the given seconds per execution, one round after another."""
    values = iter(seconds)

    def timer():
        if log is not None:
            log.append(name)
        return Timing(next(values), cpus)
    return timer


def test_a_burst_of_load_in_some_rounds_is_not_a_slow_layer():
    busy = [10 * SLOWER] * (ROUNDS - 1) + [2.0]   # slow while the machine is busy, then not
    result = compare(scripted(busy), scripted([1.0] * ROUNDS))
    assert len(result.ratios) == ROUNDS and not result.slow()


def test_a_layer_slow_in_every_round_is_reported_and_the_rounds_interleave():
    log = []
    result = compare(scripted([6.0] * ROUNDS, log=log, name="backend"),
                     scripted([1.0] * ROUNDS, log=log, name="reference"))
    assert result.slow() and min(result.ratios) == 6.0
    assert log == ["backend", "reference"] * ROUNDS


def test_the_rounds_stop_at_the_first_one_at_normal_speed():
    log = []
    result = compare(scripted([9.0, 1.0, 9.0, 9.0, 9.0], log=log, name="b"),
                     scripted([1.0] * ROUNDS))
    assert result.ratios == [9.0, 1.0] and not result.slow() and log == ["b", "b"]


def test_a_reference_on_several_cpus_against_a_backend_on_one_is_said():
    result = compare(scripted([8.0] * ROUNDS, cpus=1.0), scripted([1.0] * ROUNDS, cpus=4.0))
    assert result.slow()
    assert result.threads() == ("; the reference backend kept about 4 CPUs busy, this backend "
                                "one (per CPU it is 2.0x slower)")
    same = compare(scripted([8.0] * ROUNDS), scripted([1.0] * ROUNDS))
    assert same.threads() == ""


def test_a_round_is_the_best_batch_with_its_cpu_share():
    ticks = iter([0, 5, 10, 12, 20, 23])            # batches of 5, 2 and 3 s: the second wins
    cpu = iter([0.0, 5.0, 0.0, 4.0, 0.0, 3.0])      # on 2 CPUs
    timing = speed_cases.time_round(lambda n: None, clock=lambda: float(next(ticks)),
                                    cpu_clock=lambda: next(cpu))
    assert timing.seconds == 2.0 / speed_cases.RUNS and timing.cpus == 2.0


needs_make = pytest.mark.skipif(shutil.which("make") is None or shutil.which("cc") is None,
                                reason="needs make and a C compiler")


@pytest.fixture(scope="module")
def scaffold(tmp_path_factory):
    directory = tmp_path_factory.mktemp("scaffold") / "acme"
    subprocess.run(["backend-conformance", "init", "--vendor", "Acme", "--name", "Npu",
                    str(directory)], check=True, capture_output=True)
    return directory


@needs_make
def test_the_scaffold_refuses_the_activation_functions_it_does_not_implement(scaffold):
    import loader
    subprocess.run(["make", "-C", str(scaffold)], check=True, capture_output=True)
    with loader.Runtime(dynamic_backends_path=str(scaffold)) as runtime:
        backend = runtime.create_backend("AcmeNpu")
    assert backend.version == loader.BACKEND_API_VERSION  # it claims 1.3 ...
    assert backend.is_layer_supported("Activation", [(4,)], {"function": "leaky_relu"})
    for function in ("elu", "gelu", "mish", "clip"):  # ... and refuses what 1.3 added
        answer = backend.is_layer_supported("Activation", [(4,)], {"function": function})
        assert not answer and "not implemented" in answer.reason
    assert not backend.is_layer_supported("Subtraction", [(4,), (4,)])
