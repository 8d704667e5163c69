"""The network layer (Kafka's kafka.network): ``socket_server.py`` the listeners and their
acceptors, ``connection.py`` a client connection and the dispatch of its requests,
``request_channel.py`` a request in flight, ``tls_handshake.py`` a TLS connection before its
handshake is over, ``connection_quotas.py`` connection limits, ``process_tuning.py`` malloc and
open-files tuning. Nothing here knows an API beyond the handler table of ``broker/apis/``."""
