"""The network layer (Kafka's kafka.network): ``socket_server.py`` the listeners and their
acceptors, ``connection.py`` a client connection and the dispatch of its requests,
``request_channel.py`` a request in flight, ``tls_handshake.py`` a TLS connection before its
handshake is over, ``memory_pool.py`` the request and answer memory budgets,
``connection_quotas.py`` connection limits, ``process_tuning.py`` malloc and open-files tuning;
``error_placement.py`` and ``coordinator_routing.py`` answer errors (faults, NOT_COORDINATOR)
before a request reaches its handler."""
