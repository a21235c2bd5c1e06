#!/usr/bin/python3
"""A Secret Service that accepts every org.freedesktop.Secret.Service call and never answers.

Run it on a private bus (DBUS_SESSION_BUS_ADDRESS); it claims org.freedesktop.secrets, prints
"ready" on stdout once the name is owned, and holds every method call open until it is killed.
Properties.GetAll is answered (an empty Collections list), so clients get past proxy set-up and
hang on the real call (OpenSession, SearchItems, ReadAlias, ...): the deadline must save them.

With --no-session every such call is answered at once with org.freedesktop.Secret.Error.NoSession
(what a restarted daemon says about a session it never opened): the client must take the service as
gone, not as a failure of the call.
"""
import sys

import dbus
import dbus.exceptions
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

SERVICE = "org.freedesktop.Secret.Service"
PROPS = "org.freedesktop.DBus.Properties"
NO_SESSION = "--no-session" in sys.argv[1:]


class HangingService(dbus.service.Object):
    def __init__(self, bus):
        super().__init__(bus, "/org/freedesktop/secrets")
        self.pending = []  # replies we keep and never send

    def _hold(self, name, reply, error):
        if NO_SESSION:
            error(dbus.exceptions.DBusException("no session %s" % name, name="org.freedesktop.Secret.Error.NoSession"))
            return
        self.pending.append((name, reply, error))
        sys.stderr.write("holding %s (%d pending)\n" % (name, len(self.pending)))
        sys.stderr.flush()

    @dbus.service.method(PROPS, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        return dbus.Dictionary({"Collections": dbus.Array([], signature="o")}, signature="sv")

    @dbus.service.method(PROPS, in_signature="ss", out_signature="v")
    def Get(self, interface, name):
        return dbus.Array([], signature="o")

    @dbus.service.method(SERVICE, in_signature="sv", out_signature="vo", async_callbacks=("reply", "error"))
    def OpenSession(self, algorithm, data, reply, error):
        self._hold("OpenSession", reply, error)

    @dbus.service.method(SERVICE, in_signature="a{ss}", out_signature="aoao", async_callbacks=("reply", "error"))
    def SearchItems(self, attributes, reply, error):
        self._hold("SearchItems", reply, error)

    @dbus.service.method(SERVICE, in_signature="ao", out_signature="aoo", async_callbacks=("reply", "error"))
    def Unlock(self, objects, reply, error):
        self._hold("Unlock", reply, error)

    @dbus.service.method(SERVICE, in_signature="aoo", out_signature="a{o(oayays)}", async_callbacks=("reply", "error"))
    def GetSecrets(self, items, session, reply, error):
        self._hold("GetSecrets", reply, error)

    @dbus.service.method(SERVICE, in_signature="s", out_signature="o", async_callbacks=("reply", "error"))
    def ReadAlias(self, name, reply, error):
        self._hold("ReadAlias", reply, error)


def main():
    DBusGMainLoop(set_as_default=True)
    bus = dbus.SessionBus()
    name = dbus.service.BusName("org.freedesktop.secrets", bus, do_not_queue=True)
    service = HangingService(bus)
    print("ready", flush=True)
    GLib.MainLoop().run()


if __name__ == "__main__":
    main()
