"""MQTT: the publisher that drains the journal's outbox and serves commands (``publisher``),
the wire formats, commands and TLS it shares (``wire``), and the feed for a person
(``feed``: ``paigow-table monitor``, the demo's printer).

Nothing is imported here, so the command line registers ``monitor`` without loading aiomqtt.
"""
