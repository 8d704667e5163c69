"""ErrorCode numbers and retriable flags, checked against Kafka's Errors table."""
import pytest

from protocol.errors import ErrorCode, KafkaError

# (name, code, retriable) rows of Kafka's protocol error table (kafka.apache.org/protocol,
# "Error Codes"), the retriable column being "the exception extends RetriableException".
SPOT_CHECKS = [
    ("UNKNOWN_SERVER_ERROR", -1, False),
    ("NONE", 0, False),
    ("OFFSET_OUT_OF_RANGE", 1, False),
    ("CORRUPT_MESSAGE", 2, True),
    ("UNKNOWN_TOPIC_OR_PARTITION", 3, True),
    ("NOT_LEADER_OR_FOLLOWER", 6, True),
    ("REPLICA_NOT_AVAILABLE", 9, True),
    ("COORDINATOR_LOAD_IN_PROGRESS", 14, True),
    ("COORDINATOR_NOT_AVAILABLE", 15, True),
    ("NOT_COORDINATOR", 16, True),
    ("INVALID_TOPIC_EXCEPTION", 17, False),
    ("ILLEGAL_GENERATION", 22, False),
    ("INCONSISTENT_GROUP_PROTOCOL", 23, False),
    ("INVALID_GROUP_ID", 24, False),
    ("UNKNOWN_MEMBER_ID", 25, False),
    ("INVALID_SESSION_TIMEOUT", 26, False),
    # RebalanceInProgressException extends ApiException, not RetriableException: clients
    # rejoin rather than resend.
    ("REBALANCE_IN_PROGRESS", 27, False),
    ("UNSUPPORTED_VERSION", 35, False),
    ("TOPIC_ALREADY_EXISTS", 36, False),
    ("NOT_CONTROLLER", 41, True),
    ("INVALID_REQUEST", 42, False),
    ("CONCURRENT_TRANSACTIONS", 51, True),
    ("KAFKA_STORAGE_ERROR", 56, True),
    ("UNKNOWN_PRODUCER_ID", 59, False),
    ("NON_EMPTY_GROUP", 68, False),
    ("GROUP_ID_NOT_FOUND", 69, False),
    ("FETCH_SESSION_ID_NOT_FOUND", 70, True),
    ("FENCED_LEADER_EPOCH", 74, True),
    ("UNSUPPORTED_COMPRESSION_TYPE", 76, False),
    ("MEMBER_ID_REQUIRED", 79, False),
    ("GROUP_MAX_SIZE_REACHED", 81, False),
    ("FENCED_INSTANCE_ID", 82, False),
    ("INVALID_RECORD", 87, False),
    ("UNSTABLE_OFFSET_COMMIT", 88, True),
    ("THROTTLING_QUOTA_EXCEEDED", 89, True),
    ("PRODUCER_FENCED", 90, False),
    ("POSITION_OUT_OF_RANGE", 99, False),
    ("UNKNOWN_TOPIC_ID", 100, True),
    ("FENCED_MEMBER_EPOCH", 110, False),
    ("STALE_MEMBER_EPOCH", 113, False),
    ("TRANSACTION_ABORTABLE", 120, False),
    ("SHARE_SESSION_NOT_FOUND", 122, True),
    ("INVALID_REGULAR_EXPRESSION", 128, False),
    ("REBOOTSTRAP_REQUIRED", 129, False),
    ("STREAMS_TOPOLOGY_FENCED", 132, False),
    ("SHARE_SESSION_LIMIT_REACHED", 133, True),
]


@pytest.mark.parametrize("name,code,retriable", SPOT_CHECKS)
def test_spot_checks_against_kafkas_table(name, code, retriable):
    error = ErrorCode[name]
    assert error == code
    assert error.retriable is retriable


def test_numbers_are_unique_and_contiguous():
    # IntEnum would silently turn a duplicate number into an alias; aliases do not show up in
    # iteration but do in __members__.
    assert len(ErrorCode.__members__) == len(list(ErrorCode))
    codes = sorted(int(e) for e in ErrorCode)
    assert codes == list(range(-1, codes[-1] + 1))
    assert codes[-1] >= 133


def test_from_code_maps_unknown_numbers_to_unknown_server_error():
    assert ErrorCode.from_code(25) is ErrorCode.UNKNOWN_MEMBER_ID
    assert ErrorCode.from_code(9999) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.from_code(-2) is ErrorCode.UNKNOWN_SERVER_ERROR


def test_error_codes_encode_as_plain_ints():
    assert int(ErrorCode.NOT_COORDINATOR) == 16
    assert ErrorCode.NOT_COORDINATOR + 0 == 16


def test_kafka_error_carries_code_and_message():
    with pytest.raises(KafkaError) as info:
        raise KafkaError(ErrorCode.INVALID_SESSION_TIMEOUT, "session timeout 1 ms")
    err = info.value
    assert err.code is ErrorCode.INVALID_SESSION_TIMEOUT
    assert err.message == "session timeout 1 ms"
    assert not err.retriable
    assert "INVALID_SESSION_TIMEOUT (26)" in str(err)
    assert "session timeout 1 ms" in str(err)


def test_kafka_error_accepts_a_number_and_no_message():
    err = KafkaError(16)
    assert err.code is ErrorCode.NOT_COORDINATOR
    assert err.message is None
    assert err.retriable
    assert str(err) == "NOT_COORDINATOR (16)"
