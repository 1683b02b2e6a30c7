#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# An application embedding legba-server through GObject introspection
# (LegbaServer-1.0) answers client events itself, as a backend's handler
# would: on a private or presence channel, `client-ask` gets an `answer`
# back to its sender alone, `client-shout` is refused (pusher:error 4303),
# and any other client event is relayed to the channel as usual. It also
# logs who joins, leaves and disconnects.
#
#   server-hooks.py APP_KEY APP_SECRET [PORT]
#
# A pusher-js client then does:
#   channel.bind('answer', (data) => console.log(data.echo))
#   channel.trigger('client-ask', {q: 'hello'})
import json
import sys

import gi

gi.require_version('GLib', '2.0')
gi.require_version('LegbaServer', '1.0')
from gi.repository import GLib, LegbaServer  # noqa: E402


def on_client_event(server, event):
    """Runs on the server's main context, inside its handling of the frame:
    answer quickly (or keep `event` and reply later from the main loop)."""
    name = event.get_name()
    if name == 'client-shout':
        event.refuse('no shouting here')
        return True
    if name != 'client-ask':
        return False  # relayed to the channel's other subscribers
    # The data as the client wrote it: pusher-js sends an object, which
    # arrives here as its JSON text.
    asked = json.loads(event.get_data() or 'null')
    if isinstance(asked, str):
        asked = json.loads(asked)
    reply = {'echo': asked, 'from': event.get_socket_id()}
    event.reply('answer', json.dumps(reply))
    return True  # handled: not relayed


def on_subscribed(server, app_id, socket_id, channel, user_id):
    print(f'{socket_id} joined {channel} as {user_id}', file=sys.stderr)


def on_unsubscribed(server, app_id, socket_id, channel, user_id):
    print(f'{socket_id} left {channel}', file=sys.stderr)


def on_connection_closed(server, app_id, socket_id, user_id, channels):
    print(f'{socket_id} closed, was in {", ".join(channels) or "nothing"}',
          file=sys.stderr)


def make_server(key, secret, port=0):
    server = LegbaServer.Server.new()
    server.add_app('1', key, secret)
    server.connect('client-event', on_client_event)
    server.connect('subscribed', on_subscribed)
    server.connect('unsubscribed', on_unsubscribed)
    server.connect('connection-closed', on_connection_closed)
    server.listen('127.0.0.1', port)
    return server


def main():
    if len(sys.argv) < 3:
        print(f'usage: {sys.argv[0]} APP_KEY APP_SECRET [PORT]',
              file=sys.stderr)
        return 2
    server = make_server(sys.argv[1], sys.argv[2],
                         int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    ws = server.get_url().replace('http', 'ws', 1)
    print(f'{ws}/app/{sys.argv[1]}?protocol=7', flush=True)
    loop = GLib.MainLoop()
    for signum in (2, 15):  # SIGINT, SIGTERM
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signum, loop.quit)
    loop.run()
    server.shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
