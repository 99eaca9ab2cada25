"""pyproject's `filterwarnings` makes a warning attributed to a tlsprobe module an error in
the suite, so the next deprecation fails CI instead of reaching a user's stderr: tlsprobe's
own `warnings.warn`, and a dependency's warning that names tlsprobe's line as its caller
(`stacklevel=2`, as cryptography's deprecated attributes do). Code is run here under a
tlsprobe module name (`__name__` is what the warnings machinery matches); a module that
merely starts with the same letters is not tlsprobe's."""
from __future__ import annotations

import types
from typing import Any
import warnings

import pytest


def _run_as(module: str, source: str, **names: object) -> None:
    exec(compile(source, f"<{module}>", "exec"), {"__name__": module, **names})


def test_tlsprobe_own_warning_is_an_error() -> None:
    with pytest.raises(DeprecationWarning, match="own"):
        _run_as("tlsprobe.engine.example", "import warnings\n"
                "warnings.warn('own', DeprecationWarning)")
    with pytest.raises(UserWarning, match="top"):
        _run_as("tlsprobe", "import warnings\nwarnings.warn('top')")


def test_dependency_warning_raised_for_tlsprobe_code_is_an_error() -> None:
    dependency = types.ModuleType("somedependency")
    exec("import warnings\n"
         "def old_api():\n"
         "    warnings.warn('old_api is deprecated', DeprecationWarning, stacklevel=2)\n",
         dependency.__dict__)
    with pytest.raises(DeprecationWarning, match="old_api"):
        _run_as("tlsprobe.report.example", "old_api()", old_api=dependency.old_api)
    # the same call from code that is not tlsprobe's stays a warning
    with pytest.warns(DeprecationWarning, match="old_api"):
        _run_as("tlsprobe_lookalike", "old_api()", old_api=dependency.old_api)


def test_cryptography_deprecation_in_tlsprobe_code_is_an_error() -> None:
    """The real case: a deprecated cryptography attribute named by tlsprobe's code (DSA
    since cryptography 51, FFDH since 50)."""
    from cryptography import __version__
    from cryptography.utils import CryptographyDeprecationWarning
    major = int(__version__.split(".")[0])
    source = ("from cryptography.hazmat.primitives.asymmetric import dh\n"
              "dh.DHParameterNumbers\n")
    if major < 50:
        pytest.fail(f"cryptography {__version__}: older than what `pip install .` resolves")
    with pytest.raises(CryptographyDeprecationWarning):
        _run_as("tlsprobe.kex.example", source)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _run_as("not_tlsprobe", source)
    assert [w.category for w in seen] == [CryptographyDeprecationWarning]


@pytest.mark.needs_impl("openssl")
def test_commands_with_warnings_shown_print_nothing_on_stderr(tls_server: Any,
                                                              run_cli: Any) -> None:
    """As a user with PYTHONWARNINGS=default (every warning shown once) runs them, in a real
    `python -m tlsprobe` process (the warnings at exit too, e.g. an unclosed pipe): a TLS
    1.2 probe, a default scan and the demo print nothing on stderr."""
    env = {"PYTHONWARNINGS": "default"}
    server = tls_server("openssl", proto="tls1_2")
    target = f"127.0.0.1:{server.port}"
    for args in ((target, "--tls1_2", "--no-verify"), ("scan", target, "--no-verify"),
                 ("demo", "--no-msg")):
        code, out, err = run_cli(*args, env=env, isolated=True, timeout=120)
        assert (code, err) == (0, ""), (args, out[-2000:])
