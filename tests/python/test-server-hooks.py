#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# examples/server-hooks.py, run: its LegbaServer in this process, and
# libsoup's WebSocket client (through GI) speaking Pusher protocol 7 to it.
# A client-ask gets its answer; a client-shout is refused; another client
# event is relayed. TAP output.
import hashlib
import hmac
import importlib.util
import json
import os
import sys

import gi

gi.require_version('GLib', '2.0')
gi.require_version('Soup', '3.0')
from gi.repository import GLib, Soup  # noqa: E402

KEY, SECRET = 'py-key', 'py-secret'
CHANNEL = 'private-py'
WAIT_S = 10


def load_example():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..',
                        'examples', 'server-hooks.py')
    spec = importlib.util.spec_from_file_location('server_hooks', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def wait_until(condition, what):
    context = GLib.MainContext.default()
    deadline = GLib.get_monotonic_time() + WAIT_S * 1000000
    while not condition():
        if GLib.get_monotonic_time() > deadline:
            raise AssertionError(f'timed out waiting for {what}')
        context.iteration(False) or GLib.usleep(1000)


class Client:
    def __init__(self, url):
        self.frames = []
        self.ws = None
        self.error = None
        session = Soup.Session()
        msg = Soup.Message.new('GET', url)
        session.websocket_connect_async(msg, None, None, GLib.PRIORITY_DEFAULT,
                                        None, self._connected)
        self.session = session
        wait_until(lambda: self.ws or self.error, 'the WebSocket handshake')
        if self.error:
            raise self.error
        established = self.next('pusher:connection_established')
        self.socket_id = json.loads(established['data'])['socket_id']

    def _connected(self, session, result):
        try:
            self.ws = session.websocket_connect_finish(result)
            self.ws.connect('message', self._message)
        except GLib.Error as e:
            self.error = e

    def _message(self, ws, kind, data):
        self.frames.append(json.loads(data.get_data().decode()))

    def next(self, event):
        def find():
            for i, frame in enumerate(self.frames):
                if frame.get('event') == event:
                    return i
            return None
        wait_until(lambda: find() is not None, event)
        return self.frames.pop(find())

    def send(self, frame):
        self.ws.send_text(json.dumps(frame))

    def subscribe(self, channel):
        sig = hmac.new(SECRET.encode(), f'{self.socket_id}:{channel}'.encode(),
                       hashlib.sha256).hexdigest()
        self.send({'event': 'pusher:subscribe',
                   'data': {'channel': channel, 'auth': f'{KEY}:{sig}'}})
        self.next('pusher_internal:subscription_succeeded')


def main():
    example = load_example()
    print('1..3')
    server = example.make_server(KEY, SECRET)
    url = server.get_url().replace('http', 'ws', 1) + f'/app/{KEY}?protocol=7'
    a, b = Client(url), Client(url)
    a.subscribe(CHANNEL)
    b.subscribe(CHANNEL)

    a.send({'event': 'client-ask', 'channel': CHANNEL,
            'data': json.dumps({'q': 'hello'})})
    answer = a.next('answer')
    data = json.loads(answer['data'])
    assert answer['channel'] == CHANNEL, answer
    assert data == {'echo': {'q': 'hello'}, 'from': a.socket_id}, data
    print('ok 1 client-ask answered')

    a.send({'event': 'client-shout', 'channel': CHANNEL, 'data': '{}'})
    error = a.next('pusher:error')
    assert error['data']['code'] == 4303, error
    assert error['data']['message'] == 'no shouting here', error
    print('ok 2 client-shout refused')

    a.send({'event': 'client-chat', 'channel': CHANNEL, 'data': 'hi'})
    chat = b.next('client-chat')
    assert chat['data'] == 'hi', chat
    assert not [f for f in b.frames if f.get('event') in
                ('client-ask', 'client-shout')], b.frames
    print('ok 3 client-chat relayed, the others not')

    server.shutdown()
    wait_until(lambda: server.get_connection_count() == 0, 'the shutdown')
    return 0


if __name__ == '__main__':
    sys.exit(main())
