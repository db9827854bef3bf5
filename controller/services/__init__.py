"""Every feature beside the devices, a service each (docs/architecture.md, "How to add a
feature"). A service is built by ``controller/wiring.py`` from its own settings and declares, as
the type of ``run(host)``, the narrow ports of ``controller/ports.py`` it uses; one that keeps
state in the journal is also a ``StateKeeper``.

    pole         the 2×20 pole display
    retention    closed rounds past ``retention_days`` archived once a day
    checkpoints  signed checkpoints of the hash chain on MQTT
    protection   game protection: the watch of every settled round
    clock        whether a time service synchronises the clock

The MQTT publisher (``controller/mqtt``) and the pages (``controller/display``) are services too,
in packages of their own. Nothing here imports the daemon, and the daemon imports none of them.
"""
