"""MQTT: the publisher that drains the journal's outbox (``publisher``), the commands it serves
(``commands``), the one connection both use (``session``: paho-mqtt's public API, each PUBACK's
reason code), the wire formats, commands and TLS they share (``wire``), and the feed for a
person (``feed``: ``paigow-table monitor``, the demo's printer, on aiomqtt through ``client``).

Nothing is imported here, so the command line registers ``monitor`` without loading paho.
"""
