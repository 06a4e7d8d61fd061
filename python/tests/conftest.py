"""pytest setup: no persistent kernel cache (as the C suite), a context per test module."""
import os

os.environ.setdefault("RAGJIT_CACHE_DIR", "off")

import pytest  # noqa: E402

import ragjit  # noqa: E402


@pytest.fixture(scope="module")
def ctx():
    return ragjit.Context(cache_dir="off")


def pytest_report_header(config):
    from ragjit import _lib
    return "ragjit %s from %s, libragjit from %s" % (
        ragjit.__version__, ragjit.__file__, getattr(_lib.LIB, "_name", "?"))
