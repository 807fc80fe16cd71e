"""A freedesktop notification service for the biff tests, run as its own
process (``python notification_service.py BUS_ADDRESS``) as a real
notification daemon is: it owns ``org.freedesktop.Notifications`` on the
given bus, answers ``Notify`` and prints each call as a JSON line on stdout
(after a first ``ready`` line).

It is a separate process because a QtDBus service exported from the test
process itself crashed that process now and then (a bus error in a later
``processEvents``), which is no fault of the biff under test."""

from __future__ import annotations

import json
import sys

from PySide6.QtCore import ClassInfo, QCoreApplication, QObject, Slot
from PySide6.QtDBus import QDBusConnection

SERVICE = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"


@ClassInfo({"D-Bus Interface": SERVICE})
class Notifications(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    @Slot(str, "uint", str, str, str, "QStringList", "QVariantMap", int, result="uint")
    def Notify(self, app, replaces, icon, summary, body, actions, hints,
               timeout):
        self.count += 1
        print(json.dumps([app, summary, body, dict(hints), timeout], default=str), flush=True)
        return self.count


def main(address: str) -> int:
    app = QCoreApplication([])
    bus = QDBusConnection.connectToBus(address, "notification-service")
    exported = Notifications()
    if not (bus.isConnected() and bus.registerService(SERVICE)
            and bus.registerObject(PATH, exported, QDBusConnection.RegisterOption.ExportAllSlots)):
        print(f"cannot serve {SERVICE} on {address}", file=sys.stderr)
        return 1
    print("ready", flush=True)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
