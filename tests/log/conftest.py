import pytest

from broker.log import LogConfig, MemoryLog, SegmentLog


class FakeClock:
    def __init__(self, now: int = 1_000_000):
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture(params=["memory", "segment"])
def backend(request):
    return request.param


@pytest.fixture
def open_log(backend, tmp_path, clock):
    """Factory: open_log(config=None, **config_fields) -> a log of the parametrized backend.
    For SegmentLog, calling it again reopens the same directory."""
    opened = []

    def factory(config: LogConfig | None = None, **fields):
        if config is None:
            config = LogConfig(**fields)
        if backend == "memory":
            log = MemoryLog(config, clock=clock)
        else:
            log = SegmentLog(tmp_path / "topic-0", config, clock=clock)
        opened.append(log)
        return log

    factory.backend = backend
    yield factory
    for log in opened:
        try:
            log.close()
        except Exception:
            pass
