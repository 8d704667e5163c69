"""What every coordinator shares (Kafka's coordinator-common): ``runtime.py`` shards over the
partitions of an internal topic, loading and the write path, which takes a ``result.py``
CoordinatorResult; ``timer.py`` the keyed timer; ``hashing.py`` Java's String.hashCode for
routing; ``storage.py`` the internal topic as a coordinator's log (append, markers, replay at
start); ``settings.py`` a coordinator's settings, named there and declared once in
broker/config.py."""
