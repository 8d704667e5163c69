"""Tests of broker.log: partition logs (memory and segment files) and the log manager."""
