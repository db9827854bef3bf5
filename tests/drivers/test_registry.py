"""The driver registry, open_device from config settings, and the software RNG."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from drivers import registry
from drivers.codecs.shuffler import ReferenceShufflerCodec
from drivers.events import DeviceOffline, DeviceOnline, PositionDrawn
from drivers.framing import MsgType
from drivers.registry import DRIVERS, DriverSpec, open_device
from drivers.rng import RngBoxDevice, SoftwareRng
from drivers.serial import SerialTransport
from drivers.shoe import ShoeDevice
from drivers.shuffler import ShufflerDevice
from drivers.tcp import TcpTransport
from tests.drivers.conftest import Events, running


def test_open_device_from_settings() -> None:
    shuffler = open_device(
        "shuffler",
        "reference_shuffler",
        "serial",
        port="/dev/paigow-shuffler",
        baudrate=115200,
        parity="E",
        silence_timeout=4,
        backoff_cap=2,
    )
    assert isinstance(shuffler, ShufflerDevice)
    assert isinstance(shuffler.transport, SerialTransport)
    assert shuffler.transport.describe() == "serial /dev/paigow-shuffler 115200 8E1"
    assert shuffler.silence_timeout == 4.0 and shuffler.backoff.cap == 2.0
    assert isinstance(shuffler.codec, ReferenceShufflerCodec)
    shoe = open_device("shoe", "reference_shoe", "tcp", host="10.0.0.9", port=4001)
    assert isinstance(shoe, ShoeDevice) and isinstance(shoe.transport, TcpTransport)
    rng = open_device("rng", "reference_rng", port="/dev/ttyUSB1")
    assert isinstance(rng, RngBoxDevice) and rng.silence_timeout is None
    assert isinstance(open_device("rng", "software_rng"), SoftwareRng)


@pytest.mark.parametrize(
    ("args", "settings", "message"),
    [
        (("x", "acme"), {"port": "/dev/x"}, "driver: expected one of"),
        (("x", "reference_rng", "usb"), {}, "transport: expected one of serial, tcp"),
        (("x", "reference_rng", "serial"), {}, "missing key 'port'"),
        (("x", "reference_rng", "tcp"), {"host": "h"}, "unknown setting|missing key 'port'"),
        (("x", "reference_rng", "serial"), {"port": "/d", "silence_timeout": 1}, "silence_timeout"),
        (("x", "reference_shuffler", "serial"), {"port": "/d", "baud": 9600}, "'baud'"),
        (("x", "reference_shuffler", "tcp"), {"host": "h", "port": 0}, "port: expected a TCP port"),
        (("x", "software_rng"), {"port": "/d"}, "takes no settings"),
    ],
)
def test_config_errors_name_the_key(
    args: tuple[str, ...], settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        open_device(*args, **settings)


def test_a_vendor_codec_is_one_registry_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    class AcmeShufflerCodec(ReferenceShufflerCodec):
        accepts: ClassVar[frozenset[MsgType]] = ReferenceShufflerCodec.accepts

    monkeypatch.setattr(registry, "DRIVERS", dict(DRIVERS))
    registry.register("acme_shuffler", DriverSpec(AcmeShufflerCodec, ShufflerDevice))
    device = open_device("s", "acme_shuffler", port="/dev/acme")
    assert isinstance(device, ShufflerDevice) and isinstance(device.codec, AcmeShufflerCodec)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("acme_shuffler", DriverSpec(AcmeShufflerCodec, ShufflerDevice))
    assert "acme_shuffler" in registry.driver_names()
    assert registry.driver_roles()["acme_shuffler"] == {"cards"}


def test_codec_for() -> None:
    assert registry.codec_for("reference_shuffler") is ReferenceShufflerCodec
    with pytest.raises(ValueError, match="got 'acme'"):
        registry.codec_for("acme")


def test_driver_roles() -> None:
    assert registry.driver_roles() == {
        "reference_shuffler": {"cards"},
        "reference_shoe": {"cards"},
        "reference_rng": {"position"},
        "software_rng": {"position"},
        "hid_dice": {"position"},
        "esc_pos_pole": {"pole"},
    }


async def test_software_rng_draws_when_asked(events: Events) -> None:
    rng = SoftwareRng("rng")
    alone = await rng.draw()
    assert alone.method == "software_rng" and alone.number in range(1, 8)
    async with running(rng, events):
        await events.expect(DeviceOnline)
        drawn = {(await rng.draw()).number for _ in range(300)}
        assert drawn == set(range(1, 8))
        got = [await events.expect(PositionDrawn) for _ in range(300)]
        assert {e.number for e in got} == drawn
    await events.expect(DeviceOffline)
    assert events.queue.empty()
