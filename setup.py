"""Build the Cython loader, the reference backend and the mock backends with the system C compiler.

Metadata lives in pyproject.toml. ``DYNAMIC_BACKEND_PATHS`` in the build environment becomes the
compiled-in search path list; unset, the default is the installed reference backend directory.
"""
import os
import sys
from glob import glob

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mock_backends import (fault_library_name, library_name,  # noqa: E402  (pure Python)
                           one_defect_library_name)

try:
    import Cython
    from Cython.Build import cythonize
except ImportError:
    sys.exit("dynamic-backends needs Cython 3 to build: pip install 'Cython>=3,<4'")
if int(Cython.__version__.split(".")[0]) != 3:
    sys.exit(f"dynamic-backends needs Cython 3.x to build, found Cython {Cython.__version__}")

# The project's own C: backends, mock backends, and the loader's native code (not Cython's output,
# which is not written to be free of -Wextra warnings and keeps the default flags).
C_FLAGS = ["-std=c11", "-Wall", "-Wextra", "-fvisibility=hidden", "-D_GNU_SOURCE"]
NATIVE = "loader/native"
ELF_READER = "loader/native/elf"
HOST = "loader/native/host"
# Directories of C compiled apart with C_FLAGS and linked into the Python extension of that name.
NATIVE_CODE = {"loader._core": [NATIVE, ELF_READER]}


class NativeLibrary(Extension):
    """A plain shared object (not a Python module) installed under an exact file name."""

    def __init__(self, output, sources, extra_compile_args=C_FLAGS, **kwargs):
        name = os.path.splitext(output)[0].replace("/", ".")
        super().__init__(name, sources, include_dirs=["abi"],
                         extra_compile_args=list(extra_compile_args), **kwargs)
        self.output = output
        self.link_stub = None  # source of a library to link against but never install


class BuildExt(build_ext):
    def get_ext_filename(self, fullname):
        # Called with the dotted name, or with only its last part (distutils' get_ext_fullpath).
        for ext in self.extensions:
            if isinstance(ext, NativeLibrary):
                if ext.name == fullname:
                    return ext.output
                if ext.name.rpartition(".")[2] == fullname:
                    return os.path.basename(ext.output)
        return super().get_ext_filename(fullname)

    def get_export_symbols(self, ext):
        return [] if isinstance(ext, NativeLibrary) else super().get_export_symbols(ext)

    def copy_extensions_to_source(self):
        # In-place and editable builds copy each output into the source tree, whose output
        # directories (reference_backend/backends, mock_backends/lib, ...) are not committed.
        for ext in self.extensions:
            self.mkpath(os.path.dirname(os.path.join(HERE, self.get_ext_filename(ext.name))))
        super().copy_extensions_to_source()

    def build_extension(self, ext):
        if ext.name in NATIVE_CODE:
            # Dependencies only now: cythonize copies an extension's dependencies to build_dir,
            # where a copy of the C would be one more hit for a grep of the checkout.
            native = NATIVE_CODE[ext.name]
            ext.depends = ext.depends + sorted(f for d in native for f in glob(f"{d}/*.[ch]"))
            ext.extra_objects = self.compiler.compile(
                sorted(f for d in native for f in glob(f"{d}/*.c")), output_dir=self.build_temp,
                include_dirs=ext.include_dirs, extra_postargs=C_FLAGS, depends=ext.depends)
        if isinstance(ext, NativeLibrary) and ext.link_stub:
            stub_dir = os.path.join(self.build_temp, "stubs")
            objects = self.compiler.compile([ext.link_stub], output_dir=self.build_temp)
            stub_name = os.path.splitext(os.path.basename(ext.link_stub))[0]
            self.compiler.link_shared_object(
                objects, f"libdbk_{stub_name}.so", output_dir=stub_dir)
            ext.library_dirs = [stub_dir]
            ext.libraries = [f"dbk_{stub_name}"]
        super().build_extension(ext)


class BuildPrograms(BuildExt):
    """Also builds the two programs the loader runs: loader/dynamic-backend-probe (isolated
    probing) and loader/dynamic-backend-host (backends out of process), which links the ELF
    reader the loader's pre-checks use."""

    def run(self):
        super().run()
        in_source = self.inplace or getattr(self, "editable_mode", False)
        target_dir = "loader" if in_source else os.path.join(self.build_lib, "loader")
        objects = self.compiler.compile(["loader/probe.c"], output_dir=self.build_temp,
                                        include_dirs=["abi"], extra_postargs=["-Wall", "-Wextra"])
        self.compiler.link_executable(objects, "dynamic-backend-probe", output_dir=target_dir,
                                      libraries=["dl"])
        sources = sorted(glob(f"{HOST}/*.c") + glob(f"{ELF_READER}/*.c"))
        objects = self.compiler.compile(
            sources, output_dir=os.path.join(self.build_temp, "host"), include_dirs=["abi"],
            extra_postargs=C_FLAGS, depends=sorted(glob(f"{HOST}/*.h") + glob(f"{ELF_READER}/*.h")
                                                   + ["abi/backend_api.h",
                                                      f"{NATIVE}/struct_members.h"]))
        self.compiler.link_executable(objects, "dynamic-backend-host", output_dir=target_dir,
                                      libraries=["dl"], extra_postargs=["-pthread"])


class BuildPy(build_py):
    """Also records the compiled-in search paths and installs the ABI header."""

    def run(self):
        super().run()
        paths = os.environ.get("DYNAMIC_BACKEND_PATHS")
        # An editable install runs the source tree itself: the configuration goes there.
        editable = getattr(self, "editable_mode", False)
        root = HERE if editable else self.build_lib
        config = os.path.join(root, "loader", "_build_config.py")
        if paths is not None:
            # On stderr itself: pip shows a build's output with -v, and no log level of
            # setuptools' reaches it in every version.
            sys.stderr.write(f"dynamic-backends: DYNAMIC_BACKEND_PATHS={paths!r} at build time "
                             "becomes the compiled-in search path list; the bundled reference "
                             "backend's directory is not on it\n")
            sys.stderr.flush()
        self.mkpath(os.path.dirname(config))
        with open(config, "w") as f:
            f.write('"""Written by setup.py at build time."""\n\n'
                    "# DYNAMIC_BACKEND_PATHS seen at build time; None: the reference backend's "
                    "directory.\n"
                    f"COMPILED_IN_PATHS = {paths!r}\n")
        include = os.path.join(root, "loader", "include")
        self.mkpath(include)
        self.copy_file(os.path.join("abi", "backend_api.h"), include)


def mock_libraries():
    """mock_backends/*.c -> mock_backends/lib/ (safe to load in-process);
    mock_backends/hostile/*.c -> mock_backends/hostile/ (crash, hang or misbehave); then the
    one-defect and correct backends of mock_backends/one_defect/."""
    libraries = []
    sources = [(s, "lib") for s in glob("mock_backends/*.c") + glob("mock_backends/*.cpp")]
    sources += [(s, "hostile") for s in glob("mock_backends/hostile/*.c")]
    for source, directory in sorted(sources):
        stem, ext = os.path.splitext(os.path.basename(source))
        flags = C_FLAGS if ext == ".c" else ["-Wall", "-Wextra", "-fvisibility=hidden",
                                             "-fno-exceptions", "-fno-rtti"]
        library = NativeLibrary(f"mock_backends/{directory}/{library_name(stem)}", [source],
                                extra_compile_args=flags, depends=["abi/backend_api.h",
                                                                   "mock_backends/skeleton.h"])
        if stem == "missing_dependency":
            library.link_stub = "mock_backends/support/absent_dependency.c"
        libraries.append(library)
    return libraries + one_defect_libraries() + fault_libraries()


def fault_libraries():
    """mock_backends/faults/*.c -> faults/lib/ (a fault in the call a test chooses, for the
    backend host's tests)."""
    return [NativeLibrary(f"mock_backends/faults/lib/{fault_library_name(stem)}", [source],
                          extra_link_args=["-pthread"],
                          depends=["abi/backend_api.h", "mock_backends/skeleton.h",
                                   "mock_backends/subgraph_skeleton.h",
                                   "mock_backends/faults/fault.h"])
            for source in sorted(glob("mock_backends/faults/*.c"))
            for stem in [os.path.splitext(os.path.basename(source))[0]]]


# base.h and the parts it includes: every one-defect and correct backend includes them all.
ONE_DEFECT_HEADERS = sorted(glob("mock_backends/one_defect/*.h"))


def one_defect_libraries():
    """mock_backends/one_defect/*.c -> one_defect/lib/ (one defect each);
    mock_backends/one_defect/correct/*.c -> one_defect/correct/lib/ (correct backends)."""
    libraries = []
    for directory, correct in (("mock_backends/one_defect", False),
                               ("mock_backends/one_defect/correct", True)):
        for source in sorted(glob(f"{directory}/*.c")):
            stem = os.path.splitext(os.path.basename(source))[0]
            libraries.append(NativeLibrary(
                f"{directory}/lib/{one_defect_library_name(stem, correct)}", [source],
                libraries=["m"], depends=["abi/backend_api.h"] + ONE_DEFECT_HEADERS))
    return libraries


core = Extension(
    "loader._core",
    ["loader/_core.pyx"],
    include_dirs=["abi", NATIVE, ELF_READER, HOST],
    libraries=["dl"],
    extra_compile_args=["-D_GNU_SOURCE"],
    depends=["abi/backend_api.h", "abi/backend_api.pxd", "loader/_posix.pxd"]
    + sorted(glob("loader/_*.pxi") + glob("loader/networks/_*.pxi") + glob("loader/host/_*.pxi")
             + glob(f"{NATIVE}/*.pxd") + glob(f"{ELF_READER}/*.pxd") + glob(f"{HOST}/*.pxd")
             + [f"{HOST}/protocol.h"]),
)

reference = NativeLibrary(
    "reference_backend/backends/Reference_CpuRef_backend.so",
    sorted(glob("reference_backend/*.c")),
    libraries=["m"],
    extra_link_args=["-pthread"],
    depends=["abi/backend_api.h"] + glob("reference_backend/*.h"),
)

setup(
    # Generated C goes under build/, out of the sources' way.
    ext_modules=cythonize([core], build_dir="build/cython", include_path=["abi", NATIVE, ELF_READER, HOST],
                          compiler_directives={"language_level": 3})
    + [reference] + mock_libraries(),
    cmdclass={"build_ext": BuildPrograms, "build_py": BuildPy},
)
