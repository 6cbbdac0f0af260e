"""Opens N keep-alive connections to a server, each after one answered request, and holds them.

While they are open it reports the server's resident memory and checks that a fresh request is
still answered. Prints `idle_conns=N rss_mb=M answered=yes|no` last.
With HOLD_SECONDS it prints `holding N` once they are open and just holds them that long (or until
it is terminated), for a benchmark that loads the server meanwhile.
usage: idle_connections.py PORT PID N [HOLD_SECONDS]
"""
import resource
import socket
import sys
import time

port, pid, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 1000), hard))

REQUEST = b"GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n"
held = []
deadline = time.time() + 120
for _ in range(count):
    if time.time() > deadline:
        break
    # Spread over 127.0.0.2-127.0.0.201 (100 per address for 20,000): the server caps
    # connections per client address (256 by default), and real idle clients come from many.
    source = f"127.0.0.{2 + len(held) % 200}"
    connection = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    connection.sendall(REQUEST)
    answer = connection.recv(4096)
    if not answer.startswith(b"HTTP/1.1 200"):
        print("unexpected answer", answer[:80], file=sys.stderr)
        break
    held.append(connection)

if len(sys.argv) > 4:
    print(f"holding {len(held)}", flush=True)
    time.sleep(float(sys.argv[4]))
    sys.exit(0)

time.sleep(1)
with open(f"/proc/{pid}/status") as status:
    rss_kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))

probe = socket.create_connection(("127.0.0.1", port), timeout=5)
started = time.time()
probe.sendall(REQUEST)
answered = probe.recv(4096).startswith(b"HTTP/1.1 200")
probe_ms = (time.time() - started) * 1000
# The held connections must still be alive: one more request on a few of them.
alive = 0
for connection in held[:: max(1, len(held) // 20)]:
    connection.sendall(REQUEST)
    alive += connection.recv(4096).startswith(b"HTTP/1.1 200")
print(f"probe answered in {probe_ms:.1f} ms; {alive} sampled held connections still answer")
print(f"idle_conns={len(held)} rss_mb={rss_kb / 1024:.1f} answered={'yes' if answered else 'no'}")
