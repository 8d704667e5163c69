"""Sans-I/O Kafka wire codec: bytes in, typed messages out, and back.

Knows nothing of sockets, time or broker state.
"""
