"""How a test preloads a libssl.so.3 into an unmodified program, on either base.

Used by the interop, wireshark and net drivers (they put tests/common on
sys.path). Standard library only.

On the 3.0 base the fork sits alone in build/lib and uses the system's
libcrypto: LD_PRELOAD of the fork is all a program needs. On the 3.5 base the
fork needs the 3.5 libcrypto.so.3 beside it in build-3.5/lib (Debian 12 has
none), and so does Debian 13's real libssl.so.3, which tests/security35
unpacks into a directory with a link to that libcrypto. LD_PRELOAD of the
libssl alone is not enough there: a program that links libcrypto itself
(openssl, curl) has the system's 3.0 libcrypto.so.3 loaded before the
preloaded libssl's own dependencies are looked up, and the 3.5 libssl then
fails to load (its OPENSSL_3.2.0+ symbols are missing). So when a
libcrypto.so.3 sits beside the preloaded libssl, that directory also goes
first on LD_LIBRARY_PATH, the way README tells users to run the 3.5 build.
"""
import os

PRELOAD_VARS = ("LD_PRELOAD", "LD_LIBRARY_PATH")


def preload_dir(lib):
    """preload_dir(lib): the directory to put on LD_LIBRARY_PATH with lib
    preloaded (the one holding lib's own libcrypto.so.3), or None when lib
    uses the system's libcrypto (the 3.0 base, the system libssl)."""
    d = os.path.dirname(os.path.abspath(lib))
    if os.path.exists(os.path.join(d, "libcrypto.so.3")) and not d.startswith(("/usr/", "/lib")):
        return d
    return None


def preload_vars(lib):
    """preload_vars(lib): the environment variables (a dict) that make an
    unmodified program load lib as its libssl.so.3, with its own libcrypto."""
    out = {"LD_PRELOAD": lib}
    d = preload_dir(lib)
    if d:
        out["LD_LIBRARY_PATH"] = d
    return out


def preload_env_args(lib):
    """preload_env_args(lib): preload_vars(lib) as NAME=VALUE words for
    env(1), for a program started through another (testbed exec ... env)."""
    return ["%s=%s" % kv for kv in sorted(preload_vars(lib).items())]
