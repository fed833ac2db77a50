"""Backend API versions (docs/loading.md, The checks): what a BackendVersion may hold and the
compatibility rule."""
import pickle

import numpy as np
import pytest

import loader
from loader import BackendVersion, is_backend_compatible


def test_a_version_is_two_integers_shown_as_major_dot_minor():
    version = BackendVersion(1, 2)
    assert version == (1, 2) and (version.major, version.minor) == (1, 2)
    assert str(version) == "1.2" and repr(version) == "BackendVersion(major=1, minor=2)"
    assert BackendVersion(np.uint32(4), 2**32 - 1) == (4, 2**32 - 1)
    assert type(BackendVersion(np.uint32(4), 0).major) is int
    assert pickle.loads(pickle.dumps(version)) == version
    assert version._replace(minor=3) == (1, 3)


@pytest.mark.parametrize("major, minor, words", [
    ("1", 0, ["major", "str"]),
    (1, "0", ["minor", "str"]),
    (True, 0, ["major", "bool"]),
    (1, False, ["minor", "bool"]),
    (1.0, 0, ["major", "float"]),
    (None, 0, ["major", "NoneType"]),
])
def test_anything_but_an_integer_is_a_type_error(major, minor, words):
    with pytest.raises(TypeError) as raised:
        BackendVersion(major, minor)
    for word in words:
        assert word in str(raised.value)


@pytest.mark.parametrize("major, minor, words", [
    (-1, 0, ["major is -1", "from 0 to 4294967295"]),
    (0, -1, ["minor is -1"]),
    (2**32, 0, ["major is 4294967296"]),
    (1, 2**64, ["minor is 18446744073709551616"]),
])
def test_integers_outside_uint32_are_a_value_error(major, minor, words):
    with pytest.raises(loader.InvalidArgumentError) as raised:
        BackendVersion(major, minor)
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, loader.BackendError)
    for word in words:
        assert word in str(raised.value)


def test_replace_and_make_are_checked_too():
    with pytest.raises(ValueError, match="minor is -1"):
        BackendVersion(1, 0)._replace(minor=-1)
    with pytest.raises(TypeError, match="major"):
        BackendVersion._make(["1", 0])


@pytest.mark.parametrize("backend, api, compatible", [
    ((1, 0), (1, 1), True), ((1, 1), (1, 1), True), ((1, 2), (1, 1), False),
    ((0, 9), (1, 1), False), ((2, 0), (1, 1), False),
])
def test_compatible_iff_same_major_and_minor_not_newer(backend, api, compatible):
    assert is_backend_compatible(BackendVersion(*backend), BackendVersion(*api)) is compatible
    assert is_backend_compatible(backend, api) is compatible


def test_compatibility_is_against_the_runtime_by_default():
    assert is_backend_compatible(loader.BACKEND_API_VERSION)
    assert not is_backend_compatible((loader.BACKEND_API_VERSION.major + 1, 0))


@pytest.mark.parametrize("value, error", [
    ("10", TypeError), ((1,), TypeError), ((1, 0, 0), TypeError), (("1", "0"), TypeError),
    ((-1, 0), ValueError),
])
def test_compatibility_checks_its_arguments_like_a_version(value, error):
    with pytest.raises(error, match="backend_version|BackendVersion"):
        is_backend_compatible(value)
