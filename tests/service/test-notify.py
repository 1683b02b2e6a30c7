#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""legba-server speaks systemd's notification protocol (sd_notify(3)), as
a Type=notify unit needs: READY=1 with its address in STATUS= once its
port accepts connections, STOPPING=1 on SIGTERM, RELOADING=1 then READY=1
around a configuration reload on SIGHUP, and nothing when it refuses to
start (the default configuration, whose secret is not set). The reload
itself: a removed app's sockets are closed with 4001, an unchanged app's
stay, a new app is served; a file with an error changes nothing.

The test owns the datagram socket NOTIFY_SOCKET names, as systemd does.
Usage: test-notify.py DEFAULT-CONFIG (legba-server from $LEGBA_SERVER)."""

import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

# Every wait has this deadline: a server starts and stops in well under a
# second, a sanitized one in a few.
DEADLINE_S = 30
SERVER = os.environ['LEGBA_SERVER']
APP = ['--app-id', '1', '--app-key', 'app-key', '--app-secret', 'secret']


def receive(sock):
    """The next notification, as a dict of its assignments."""
    sock.settimeout(DEADLINE_S)
    data = sock.recv(4096).decode()
    return dict(line.split('=', 1) for line in data.splitlines() if line)


def start(tmp, args):
    path = os.path.join(tmp, 'notify')
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    env = dict(os.environ, NOTIFY_SOCKET=path)
    server = subprocess.Popen([SERVER] + args, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return sock, server


def test_ready_then_stopping(tmp):
    sock, server = start(tmp, APP + ['--port', '0'])
    try:
        state = receive(sock)
        assert state.get('READY') == '1', state
        status = re.fullmatch(r'Listening on 127\.0\.0\.1:(\d+)',
                              state.get('STATUS', ''))
        assert status, state
        port = int(status.group(1))
        # Ready means the port takes connections now, and the line on
        # stdout was written before.
        socket.create_connection(('127.0.0.1', port),
                                 timeout=DEADLINE_S).close()
        line = server.stdout.readline()
        assert line == f'legba-server listening on 127.0.0.1:{port}\n', line

        server.send_signal(signal.SIGTERM)
        state = receive(sock)
        assert state.get('STOPPING') == '1', state
        assert state.get('STATUS', '').startswith('Closing '), state
        assert server.wait(DEADLINE_S) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        sock.close()
        os.unlink(os.path.join(tmp, 'notify'))
    print('ok - READY=1 once listening, STOPPING=1 on SIGTERM')


class WebSocket:
    """A Pusher protocol 7 client over a plain socket, frames by hand
    (RFC 6455): the test needs nothing beyond Python's library."""

    def __init__(self, port, key):
        self.sock = socket.create_connection(('127.0.0.1', port),
                                             timeout=DEADLINE_S)
        nonce = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((
            f'GET /app/{key}?protocol=7 HTTP/1.1\r\n'
            f'Host: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n'
            f'Connection: Upgrade\r\nSec-WebSocket-Key: {nonce}\r\n'
            'Sec-WebSocket-Version: 13\r\n\r\n').encode())
        self.buffer = b''
        while b'\r\n\r\n' not in self.buffer:
            self.buffer += self._recv()
        head, self.buffer = self.buffer.split(b'\r\n\r\n', 1)
        assert head.startswith(b'HTTP/1.1 101'), head

    def _recv(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError('connection closed')
        return data

    def _take(self, n):
        while len(self.buffer) < n:
            self.buffer += self._recv()
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def read(self):
        """(opcode, payload) of the next frame."""
        b0, b1 = self._take(2)
        length = b1 & 0x7f
        if length == 126:
            length = int.from_bytes(self._take(2), 'big')
        elif length == 127:
            length = int.from_bytes(self._take(8), 'big')
        return b0 & 0x0f, self._take(length)

    def event(self):
        opcode, payload = self.read()
        assert opcode == 1, (opcode, payload)
        return json.loads(payload)

    def send(self, obj):
        payload = json.dumps(obj).encode()
        mask = os.urandom(4)
        assert len(payload) < 126
        self.sock.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + bytes(
            b ^ mask[i % 4] for i, b in enumerate(payload)))

    def close(self):
        self.sock.close()


def open_app(port, key):
    ws = WebSocket(port, key)
    assert ws.event()['event'] == 'pusher:connection_established'
    return ws


def alive(ws):
    ws.send({'event': 'pusher:ping', 'data': {}})
    return ws.event()['event'] == 'pusher:pong'


APPS = """
[app kept]
id = 1
key = kept-key
secret = kept-secret
"""
REMOVED = """
[app removed]
id = 2
key = removed-key
secret = removed-secret
"""
ADDED = """
[app added]
id = 3
key = added-key
secret = added-secret
"""


def test_reload(tmp):
    config = os.path.join(tmp, 'legba.conf')
    with open(config, 'w') as f:
        f.write('[server]\nport = 0\n' + APPS + REMOVED)
    sock, server = start(tmp, ['--config', config])
    try:
        state = receive(sock)
        assert state.get('READY') == '1', state
        port = int(state['STATUS'].rsplit(':', 1)[1])
        kept = open_app(port, 'kept-key')
        removed = open_app(port, 'removed-key')

        with open(config, 'w') as f:
            f.write('[server]\nport = 0\n[limits]\nmax-connections = 1\n' +
                    APPS + ADDED)
        server.send_signal(signal.SIGHUP)
        state = receive(sock)
        assert state.get('RELOADING') == '1', state
        state = receive(sock)
        assert state.get('READY') == '1', state
        assert 'read again' in state.get('STATUS', ''), state

        # Pusher protocol 7: the removed app's socket gets 4001 and is
        # closed with it; the other's goes on; the new app is served.
        error = removed.event()
        assert error['event'] == 'pusher:error', error
        assert error['data']['code'] == 4001, error
        opcode, payload = removed.read()
        assert opcode == 8 and int.from_bytes(payload[:2], 'big') == 4001, \
            (opcode, payload)
        assert alive(kept)
        open_app(port, 'added-key').close()
        # The new limit holds for the app already there.
        second = WebSocket(port, 'kept-key')
        error = second.event()
        assert error['event'] == 'pusher:error', error
        assert error['data']['code'] == 4004, error
        second.close()

        # A file with an error: refused whole, nothing changes.
        with open(config, 'w') as f:
            f.write('[server]\nport = 0\n[limits]\nmax-conections = 5\n' +
                    APPS)
        server.send_signal(signal.SIGHUP)
        assert receive(sock).get('RELOADING') == '1'
        state = receive(sock)
        assert state.get('READY') == '1', state
        assert 'not read again' in state.get('STATUS', ''), state
        assert alive(kept)
        kept.close()
        removed.close()

        server.send_signal(signal.SIGTERM)
        assert receive(sock).get('STOPPING') == '1'
        assert server.wait(DEADLINE_S) == 0
        err = server.stderr.read()
        assert 'max-conections: unknown limit; the configuration in force ' \
            'stays' in err, err
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        sock.close()
        os.unlink(os.path.join(tmp, 'notify'))
    print('ok - SIGHUP: RELOADING=1, then READY=1; apps reloaded')


def test_default_config_refused(tmp, config):
    sock, server = start(tmp, ['--config', config, '--port', '0'])
    try:
        _, err = server.communicate(timeout=DEADLINE_S)
        assert server.returncode == 1, server.returncode
        assert '[app main] secret: not set yet' in err, err
        # Nothing was sent: the server exited without being ready.
        sock.setblocking(False)
        try:
            data = sock.recv(4096)
            raise AssertionError(f'notified {data!r}')
        except BlockingIOError:
            pass
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        sock.close()
        os.unlink(os.path.join(tmp, 'notify'))
    print('ok - the default configuration is refused until its secret is set')


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_ready_then_stopping(tmp)
        test_reload(tmp)
        test_default_config_refused(tmp, sys.argv[1])


if __name__ == '__main__':
    main()
