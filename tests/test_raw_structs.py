"""The kit's ctypes mirror of the ABI (conformance/raw_structs.py) has the C header's layout: a
small C program compiled against abi/backend_api.h prints the offset and size of every member
the mirror declares, the size of every struct it mirrors whole, and the size constants; each
must equal what ctypes computes."""
import ctypes
import re
import shutil
import subprocess

import pytest

import loader
from conformance import raw_structs

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")

# Structs the mirror holds whole (so their sizeof must agree too); the others (the instance, the
# objects with function pointers) are mirrored only up to the members the kit calls.
WHOLE = [raw_structs.TensorInfo, raw_structs.Buffer, raw_structs.LayerDescription,
         raw_structs.Allocator] + sorted(set(raw_structs.DESCRIPTORS.values()), key=lambda s: s.__name__)
PARTIAL = [raw_structs.MemoryManager, raw_structs.Workload, raw_structs.WorkloadFactory,
           raw_structs.Instance]


def c_name(struct) -> str:
    return "Backend" + struct.__name__


def macro(struct, version) -> str:
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", struct.__name__).upper()
    return f"BACKEND_{snake}_SIZE_{version.replace('.', '_')}"


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """name -> value, as the C compiler lays the header out."""
    lines = []
    for struct in WHOLE + PARTIAL:
        for member, _ in struct._fields_:
            lines.append(f'    printf("{struct.__name__}.{member} %zu %zu\\n", '
                         f'offsetof({c_name(struct)}, {member}), '
                         f'sizeof((({c_name(struct)} *)0)->{member}));')
    for struct in WHOLE:
        lines.append(f'    printf("{struct.__name__} %zu\\n", sizeof({c_name(struct)}));')
    for struct, version in raw_structs.SIZES:
        lines.append(f'    printf("{macro(struct, version)} %zu\\n", (size_t){macro(struct, version)});')
    for name in ("BACKEND_LAYER_TYPE_COUNT", "BACKEND_LAYER_TYPE_COUNT_1_3",
                 "BACKEND_MAX_DIMENSIONS", "BACKEND_MAX_LAYER_RANK"):
        lines.append(f'    printf("{name} %zu\\n", (size_t){name});')
    directory = tmp_path_factory.mktemp("layout")
    source = directory / "layout.c"
    source.write_text('#include <stddef.h>\n#include <stdio.h>\n#include "backend_api.h"\n'
                      "int main(void)\n{\n" + "\n".join(lines) + "\n    return 0;\n}\n")
    program = directory / "layout"
    subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", "-I", loader.get_include(), "-o",
                    str(program), str(source)], check=True)
    output = subprocess.run([str(program)], check=True, capture_output=True, text=True).stdout
    return {name: tuple(map(int, values)) for name, *values in map(str.split, output.splitlines())}


@pytest.mark.parametrize("struct", WHOLE + PARTIAL, ids=lambda s: s.__name__)
def test_every_member_sits_where_the_header_puts_it(measured, struct):
    for member, _ in struct._fields_:
        field = getattr(struct, member)
        assert (field.offset, field.size) == measured[f"{struct.__name__}.{member}"], member


@pytest.mark.parametrize("struct", WHOLE, ids=lambda s: s.__name__)
def test_every_struct_mirrored_whole_has_the_headers_size(measured, struct):
    assert ctypes.sizeof(struct) == measured[struct.__name__][0]


def test_the_size_constants_and_counts_are_the_headers(measured):
    for (struct, version), size in raw_structs.SIZES.items():
        assert size == measured[macro(struct, version)][0], macro(struct, version)
    assert raw_structs.LAYER_TYPE_COUNT == measured["BACKEND_LAYER_TYPE_COUNT"][0]
    assert raw_structs.LAYER_TYPE_COUNT_1_3 == measured["BACKEND_LAYER_TYPE_COUNT_1_3"][0]
    assert raw_structs.MAX_DIMENSIONS == measured["BACKEND_MAX_DIMENSIONS"][0]
    assert raw_structs.MAX_LAYER_RANK == measured["BACKEND_MAX_LAYER_RANK"][0]


def test_every_descriptor_of_the_layer_table_has_its_struct():
    from loader.layers import LAYERS, prepare
    from conformance.layer_runs import layer_cases
    with_descriptor = {data["layer"] for data in layer_cases()}
    for name, layer in LAYERS.items():
        struct = raw_structs.DESCRIPTORS.get(layer.code)
        if struct is None:
            continue
        members = {m for m, _ in struct._fields_} - {"struct_size", "reserved"}
        example = next((d for d in layer_cases() if d["layer"] == name), None)
        if example is not None:
            fields = prepare(name, [tuple(s) for s in example["inputs"]],
                             example.get("descriptor")).fields
            assert set(fields) == members, name
    assert with_descriptor
