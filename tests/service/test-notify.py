#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""legba-server speaks systemd's notification protocol (sd_notify(3)), as
a Type=notify unit needs: READY=1 with its address in STATUS= once its
port accepts connections, STOPPING=1 on SIGTERM, and nothing when it
refuses to start (the default configuration, whose secret is not set).

The test owns the datagram socket NOTIFY_SOCKET names, as systemd does.
Usage: test-notify.py DEFAULT-CONFIG (legba-server from $LEGBA_SERVER)."""

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
        test_default_config_refused(tmp, sys.argv[1])


if __name__ == '__main__':
    main()
