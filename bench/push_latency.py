"""Commit-to-APNs latency at light load: the real deliveryd (release) and the APNs simulator.

Creates ORDERS orders with one Live Activity each, then sends their status changes one at a time,
PAUSE_MS apart. For every change it takes the moment the request was sent (an upper bound of the
commit) and the moment the simulator received the push, and prints the percentiles. Ends with:
    pushes=N p50_ms=X p99_ms=Y max_ms=Z

usage: push_latency.py DELIVERYD_BINARY (run from the repository root, with the test virtualenv)
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

from benchlib import certificates, free_port, wait_for

ORDERS = int(os.environ.get("ORDERS", "100"))
PAUSE_MS = int(os.environ.get("PAUSE_MS", "50"))
ADMIN = "bench-admin-key-0123456789"


def main():
    binary = sys.argv[1]
    work = tempfile.mkdtemp(prefix="push-latency-")
    processes = []
    try:
        certificates(work)
        simulator_port, api_port = free_port(), free_port()
        record = os.path.join(work, "record.jsonl")
        processes.append(subprocess.Popen([
            sys.executable, "Tests/apns-simulator/simulator.py", "--port", str(simulator_port),
            "--cert", f"{work}/server.pem", "--key", f"{work}/server.key",
            "--public-key", f"{work}/signing.pub", "--record", record,
        ]))
        url = f"https://127.0.0.1:{simulator_port}"
        processes.append(subprocess.Popen([
            binary, "--listen", f"127.0.0.1:{api_port}", "--data-dir", f"{work}/data", "--admin-key", ADMIN,
            "--access-log", "off", "--apns-key-file", f"{work}/signing.pem", "--apns-key-id", "ABC123DEFG",
            "--apns-team-id", "DEF123GHIJ", "--apns-topic", "com.example.app", "--apns-development-url", url,
            "--apns-production-url", url, "--apns-ca-file", f"{work}/ca.pem",
        ], stderr=subprocess.DEVNULL))
        wait_for(simulator_port)
        wait_for(api_port)

        def call(method, path, bearer, body):
            request = urllib.request.Request(
                f"http://127.0.0.1:{api_port}{path}", method=method, data=json.dumps(body).encode(),
                headers={"Authorization": f"Bearer {bearer}", "Content-Type": "application/json"})
            with urllib.request.urlopen(request) as response:
                return json.load(response)

        merchant = call("POST", "/v1/admin/keys", ADMIN, {"role": "merchant", "merchantId": "m-1"})["key"]
        eta = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 1800))
        orders = []
        for index in range(ORDERS):
            created = call("POST", "/v1/orders", merchant, {
                "number": f"L-{index}", "merchantName": "Bench", "items": [{"name": "Tea", "quantity": 1, "price": 2}],
                "customer": {"id": f"c-{index}", "name": "Ana", "phone": "+49 30 1234567", "locale": "en"},
                "address": "Somewhere 1", "payment": {"method": "cash"}, "estimatedArrival": eta})
            token = "%064x" % random.getrandbits(256)
            order_id = created["order"]["id"]
            call("PUT", f"/v1/orders/{order_id}/activities/a", created["trackingToken"],
                 {"pushToken": token, "environment": "development"})
            orders.append((order_id, token))

        sent = {}
        for status in ("preparing", "pickup"):
            for order_id, token in orders:
                time.sleep(PAUSE_MS / 1000)
                sent[(token, status)] = time.time()
                call("POST", f"/v1/orders/{order_id}/status", merchant, {"status": status})
        time.sleep(2)

        latencies = []
        with open(record) as lines:
            for line in lines:
                entry = json.loads(line)
                status = json.loads(entry["payload"])["aps"]["content-state"]["status"]
                if (entry["token"], status) in sent:
                    latencies.append((entry["received_at"] - sent[(entry["token"], status)]) * 1000)
        latencies.sort()
        if len(latencies) != len(sent):
            sys.exit(f"{len(sent)} changes but {len(latencies)} pushes")
        p50 = latencies[len(latencies) // 2]
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        print(f"pushes={len(latencies)} p50_ms={p50:.1f} p99_ms={p99:.1f} max_ms={latencies[-1]:.1f}")
    finally:
        for process in processes:
            process.kill()
            process.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
