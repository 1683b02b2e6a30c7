#!/usr/bin/python3
# Legba: real-time rooms for GStreamer
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The introspection data (Legba-1.0, LegbaServer-1.0) through Debian's PyGObject:
# a Python participant (LegbaServer in this process, a LegbaCall) and a C
# participant (the legba-call program) send each other video, audio and a
# data message. TAP output.
import json
import os
import subprocess
import sys
import tempfile

import gi

gi.require_version('GLib', '2.0')
gi.require_version('Gst', '1.0')
gi.require_version('Json', '1.0')
gi.require_version('Legba', '1.0')
gi.require_version('LegbaServer', '1.0')
from gi.repository import GLib, Gst, Json, Legba, LegbaServer  # noqa: E402

DEADLINE_S = 120


def main():
    Gst.init(None)
    print('1..1')
    server = LegbaServer.Server.new()
    server.add_app('1', 'py-key', 'py-secret')
    server.listen('127.0.0.1', 0)
    url = server.get_url()

    out = tempfile.TemporaryFile(mode='w+')
    err = tempfile.TemporaryFile(mode='w+')
    peer = subprocess.Popen(
        [os.environ['LEGBA_CALL'], '--server', url, '--room', 'py',
         '--identity', 'c-peer', '--key', 'py-key', '--secret', 'py-secret',
         '--width', '160', '--height', '120', '--fps', '15',
         '--bitrate', '200', '--duration', '12',
         '--expect-participants', '1', '--json',
         '--send-data', '{"from": "c"}'],
        stdout=out, stderr=err)

    call = Legba.Call.new(url, 'py', 'python')
    call.set_property('app-key', 'py-key')
    call.set_property('app-secret', 'py-secret')
    call.set_property('video', Legba.CallVideo.TEST)
    call.set_property('audio', Legba.CallAudio.TEST)
    call.set_property('width', 160)
    call.set_property('height', 120)
    call.set_property('framerate', 15)
    call.set_property('bitrate', 200000)

    received = []
    errors = []
    refused = []
    loop = GLib.MainLoop()

    def on_joined(c, participant):
        hello = Json.from_string('{"from": "python"}')
        c.get_room().send_json(hello, 'chat', Legba.Reliability.RELIABLE,
                               [participant.get_id()])
        # a reserved topic is refused with the room's error domain
        try:
            c.get_room().send_json(hello, 'legba.mine',
                                   Legba.Reliability.RELIABLE, None)
        except GLib.Error as e:
            refused.append((e.domain, e.code))

    def on_data(c, participant, topic, data):
        received.append((participant.get_identity(), topic,
                         Json.to_string(data, False)))

    def on_error(c, error):
        errors.append(error.message)
        loop.quit()

    def poll():
        if peer.poll() is not None:
            loop.quit()
            return GLib.SOURCE_REMOVE
        return GLib.SOURCE_CONTINUE

    def give_up():
        errors.append('legba-call did not exit within %d s' % DEADLINE_S)
        loop.quit()
        return GLib.SOURCE_REMOVE

    call.connect('participant-joined', on_joined)
    call.connect('data-received', on_data)
    call.connect('error', on_error)
    call.start()
    GLib.timeout_add(100, poll)
    GLib.timeout_add_seconds(DEADLINE_S, give_up)
    loop.run()

    ids = call.list_remotes()
    stats = call.get_remote_stats(ids[0]) if ids else None
    call.stop()
    if peer.poll() is None:
        peer.kill()
    peer.wait()
    out.seek(0)
    err.seek(0)
    report = out.read()
    sys.stderr.write(err.read())
    problems = list(errors)
    if peer.returncode != 0:
        problems.append('legba-call exited %d' % peer.returncode)
    else:
        seen = json.loads(report)['participants']
        if len(seen) != 1 or seen[0]['identity'] != 'python' \
                or seen[0]['video_frames'] < 1 or seen[0]['data_messages'] != 1:
            problems.append('legba-call reported %s' % report.strip())
    if refused != [('legba-room-error-quark', Legba.RoomError.INVALID)]:
        problems.append('a reserved topic was refused with %r' % refused)
    if ('c-peer', None, '{"from":"c"}') not in received:
        problems.append('python received %r' % received)
    if stats is None or stats.get_value('video-frames') < 1 \
            or stats.get_value('audio-buffers') < 1:
        problems.append('python decoded %s' %
                        (stats.to_string() if stats else 'nothing'))
    server.shutdown()
    if problems:
        print('not ok 1 /gi/python-and-c # ' + '; '.join(problems))
        return 1
    print('ok 1 /gi/python-and-c')
    return 0


if __name__ == '__main__':
    sys.exit(main())
