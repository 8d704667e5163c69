"""Write broker/kafka_broker_configs.json: every broker config Kafka 4.3.1 describes, with its
type, whether it is read-only (not dynamically updatable), whether it is sensitive, and its
default, as a real Kafka broker answers DescribeConfigs for itself.

    python tools/gen_broker_configs.py

It starts Kafka 4.3.1 (tests/conformance/kafka_server.py) at its defaults apart from what a
single-node test cluster needs; a config that run sets is given the default its DEFAULT_CONFIG
synonym names (none where it has none: Kafka's null default).
"""
from __future__ import annotations

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OUT = ROOT / "broker" / "kafka_broker_configs.json"
DEFAULT_CONFIG = 5


def main() -> None:
    from protocol.messages import DescribeConfigsRequest as D
    from tests.conformance.kafka_server import KAFKA_VERSION, KafkaServer
    from tests.support import RawClient

    server = KafkaServer()
    server.start()
    try:
        client = RawClient(server.port)
        response = client.call(D(resources=[D.DescribeConfigsResource(
            resource_type=4, resource_name="1", configuration_keys=None)],
            include_synonyms=True, include_documentation=False), 4)
        client.close()
    finally:
        server.stop()
    [result] = response.results
    assert result.error_code == 0, result
    configs = {}
    for entry in sorted(result.configs, key=lambda e: e.name):
        if entry.config_source == DEFAULT_CONFIG:
            default = entry.value
        else:
            default = next((s.value for s in entry.synonyms
                            if s.source == DEFAULT_CONFIG and s.name == entry.name), None)
        configs[entry.name] = [entry.config_type, entry.read_only, entry.is_sensitive, default]
    # one config per line: [type, read_only, sensitive, default]
    lines = ",\n".join(f"  {json.dumps(name)}: {json.dumps(row)}" for name, row in configs.items())
    OUT.write_text(f'{{"kafkaVersion": {json.dumps(KAFKA_VERSION)},\n "configs": {{\n{lines}\n}}}}\n')
    print(f"wrote {len(configs)} broker configs to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
