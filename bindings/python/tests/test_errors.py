# bindings/python/tests/test_errors.py -- the one error hook: every failing call raises
# psa.Error with the library's status and message; nothing else leaks (no status returns).
import pytest

import psa
from psa import capi


def test_error_carries_status_and_library_message():
    with pytest.raises(psa.Error) as info:
        psa.Config.load("no_such_model")
    err = info.value
    assert err.status == psa.Status.ERR_NOT_FOUND
    assert err.name == "PSA_ERR_NOT_FOUND"
    assert "no_such_model" in err.message and "Wan2.1_1.3b" in err.message  # lists the models
    assert str(err).startswith("PSA_ERR_NOT_FOUND: ")
    assert isinstance(err, RuntimeError)


def test_raw_capi_raises_too():
    with pytest.raises(psa.Error) as info:
        capi.psa_config_load_embedded("Wan2.1_1.3b", "no_such_preset")
    assert info.value.status == capi.PSA_ERR_NOT_FOUND
    assert "no_such_preset" in info.value.message
    # The status of the failure stays readable, and a success clears it.
    assert capi.psa_last_error_status() == capi.PSA_ERR_NOT_FOUND
    capi.psa_config_create()
    assert capi.psa_last_error_status() == capi.PSA_OK
    assert capi.psa_last_error_message() == ""


def test_out_of_range_parameter_names_value_and_allowed_set():
    cfg = psa.Config()
    with pytest.raises(psa.Error) as info:
        cfg["block_size.n"] = 96
    assert info.value.status == psa.Status.ERR_INVALID_ARGUMENT
    assert info.value.message == "block_size.n = 96: allowed 32, 64, 128"


def test_yaml_errors_have_location():
    with pytest.raises(psa.Error) as info:
        psa.Config.load("m", yaml="m: [unclosed\n")
    assert info.value.status == psa.Status.ERR_YAML_PARSE
    assert "line" in info.value.message


def test_missing_file_is_io_error(tmp_path):
    with pytest.raises(psa.Error) as info:
        psa.Config.load("Wan2.1_1.3b", path=tmp_path / "missing.yaml")
    assert info.value.status == psa.Status.ERR_IO
    assert "missing.yaml" in info.value.message


def test_status_tables_agree():
    for status in psa.Status:
        assert capi.psa_status_name(status) == "PSA_" + status.name
        assert capi.psa_status_string(status)


def test_versions_agree():
    assert psa.__version__ == psa.library_version() == psa.header_version()
    major, minor, patch = (int(x) for x in psa.__version__.split("."))
    assert capi.psa_version_number() == major * 10000 + minor * 100 + patch
