"""Stands in for systemd's notification socket: binds an AF_UNIX datagram socket at the given path
and appends every message it receives to the given log file, one line per assignment."""

import os
import socket
import sys

path, log = sys.argv[1], sys.argv[2]
listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
listener.bind(path)
# deliveryd runs as its own user; it must be able to write to the socket.
os.chmod(path, 0o666)
with open(log, "a", buffering=1) as out:
    out.write("LISTENING\n")
    while True:
        message = listener.recv(4096).decode()
        for line in message.split("\n"):
            out.write(line + "\n")
