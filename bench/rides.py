"""Rider positions beside status changes: what positions cost, and whether they slow status changes.

usage: rides.py DELIVERYD_BINARY   (from the repository root, with the bench virtualenv; see bench/rides.sh)

One deliveryd (release) with its defaults (access log on, to a file; synchronous=full; the log
sender: no APNs key), on a fresh data directory. Setup: RIDERS riders (default 1000), each with 3
open orders being delivered to a destination, each order with one Live Activity; and, for the
status changes, ROUNDS x 2 slices of CHANGE_ORDERS orders (default 32000: four changes each, enough for
DURATION seconds at 16,000 changes a second; a phase that runs out says so) assigned to one rider.
Then ROUNDS (default 2) rounds of, alternately:
  A  DURATION seconds (default 8) of status changes alone (64 connections, as bench/e2e.sh);
  B  the same with the riders posting positions at RATE per second (default 1000), BATCH (default
     1) to a POST /v1/riders/{id}/position (each moves the rider's 3 orders).
and last, C: positions alone, as fast as the server takes them (16 connections).
Server CPU is read from /proc for each phase. Prints a table and ends with one line:
    batch=B changes_per_s=N changes_with_positions_per_s=N slowdown_pct=P positions_per_s=N max_positions_per_s=N cpu_us_per_change=X cpu_us_per_position=Y position_to_change_cost=R
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import concurrent.futures

from benchlib import free_port, wait_for
from e2e import ADMIN, Client, cpu_seconds, wrk, wrk_result

RIDERS = int(os.environ.get("RIDERS", "1000"))
CHANGE_ORDERS = int(os.environ.get("CHANGE_ORDERS", "32000"))
DURATION = int(os.environ.get("DURATION", "8"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
RATE = int(os.environ.get("RATE", "1000"))
BATCH = int(os.environ.get("BATCH", "1"))
DESTINATION = (52.520008, 13.404954)
POSITION_CONNECTIONS = 50


def order_body(number, index, destination):
    eta = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    body = {
        "number": number, "merchantName": "Bench Kitchen", "items": [{"name": "Noodles", "quantity": 1, "price": 9.5}],
        "customer": {"id": f"c-{index}", "name": "Ana", "phone": "+49 30 1234567", "locale": "en"},
        "address": "Somewhere 1", "payment": {"method": "cash"}, "estimatedArrival": eta}
    if destination:
        body["destination"] = {"latitude": DESTINATION[0], "longitude": DESTINATION[1]}
    return body


def setup(client, merchant):
    """The riders with their delivering orders, and the slices of orders for the status changes."""
    riders = []

    def rider(index):
        rider_id = f"r-{index}"
        key = client.call("POST", "/v1/admin/keys", ADMIN, {"role": "rider", "merchantId": "m-1", "riderId": rider_id})["key"]
        for slot in range(3):
            created = client.call("POST", "/v1/orders", merchant, order_body(f"R{index}-{slot}", index, True))
            order_id, tracking = created["order"]["id"], created["trackingToken"]
            client.call("PUT", f"/v1/orders/{order_id}/activities/a", tracking,
                        {"pushToken": f"{index * 3 + slot:064x}", "environment": "development"})
            client.call("PUT", f"/v1/orders/{order_id}/rider", merchant, {"riderId": rider_id, "name": "Sam Rider"})
            for status in ("pickup", "delivering"):
                client.call("POST", f"/v1/orders/{order_id}/status", key, {"status": status})
        return rider_id, key

    changer = client.call("POST", "/v1/admin/keys", ADMIN, {"role": "rider", "merchantId": "m-1", "riderId": "r-changes"})["key"]

    def change_order(index):
        created = client.call("POST", "/v1/orders", merchant, order_body(f"C{index}", 100_000 + index, False))
        order_id, tracking = created["order"]["id"], created["trackingToken"]
        client.call("PUT", f"/v1/orders/{order_id}/activities/a", tracking,
                    {"pushToken": f"{10_000_000 + index:064x}", "environment": "development"})
        client.call("PUT", f"/v1/orders/{order_id}/rider", merchant, {"riderId": "r-changes", "name": "Sam Rider"})
        return order_id

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        riders = list(pool.map(rider, range(RIDERS)))
        slices = list(pool.map(change_order, range(2 * ROUNDS * CHANGE_ORDERS)))
    return riders, changer, [slices[i * CHANGE_ORDERS:(i + 1) * CHANGE_ORDERS] for i in range(2 * ROUNDS)]


def positions_counted(client):
    """deliveryd_rider_positions_total by outcome, from /metrics."""
    text = client.call_text("/metrics")
    counts = {}
    for match in re.finditer(r'^deliveryd_rider_positions_total\{outcome="(\w+)"\} (\S+)$', text, re.M):
        counts[match.group(1)] = float(match.group(2))
    return counts


def settle(client, timeout=180):
    """Waits until no push is left to send: a phase starts with nothing of the one before still to do
    (the setup's pushes, or those a phase with positions queued), so that no phase pays for another."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        match = re.search(r"^deliveryd_outbox_depth (\S+)$", client.call_text("/metrics"), re.M)
        if match and float(match.group(1)) == 0:
            return
        time.sleep(0.2)
    sys.exit(f"pushes still queued after {timeout} s")


class TextClient(Client):
    def call_text(self, path):
        import http.client
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        connection.request("GET", path, headers={"Authorization": f"Bearer {ADMIN}"})
        return connection.getresponse().read().decode()


def phase(server, work, merchant, changer, orders, riders_file, position_rate, with_changes=True, connections=None):
    """DURATION seconds of status changes and/or positions; returns rates and the server's CPU."""
    environment = {"RIDERS_FILE": riders_file, "DEST_LAT": str(DESTINATION[0]), "DEST_LON": str(DESTINATION[1])}
    before = cpu_seconds(server.pid)
    posters = positions = None
    if with_changes:
        path = os.path.join(work, f"orders-{uuid.uuid4().hex[:6]}.txt")
        with open(path, "w") as file:
            file.writelines(f"{order}\n" for order in orders)
        posters = wrk("status.lua", server.port, 64, 2, DURATION,
                      {"ORDERS_FILE": path, "MERCHANT_KEY": merchant, "RIDER_KEY": changer})
    if position_rate is not None:
        count = connections or POSITION_CONNECTIONS
        positions = wrk("../rides/positions.lua", server.port, count, 1, DURATION,
                        {**environment, "RATE": str(position_rate), "CONNECTIONS": str(count),
                         "BATCH": str(BATCH if with_changes else 1)})
    changes = wrk_result(posters) if posters else None
    moved = wrk_result(positions) if positions else None
    cpu = cpu_seconds(server.pid) - before
    result = {"cpu_s": round(cpu, 3)}
    if changes:
        # Only the posts within the slice's four rounds change anything (see e2e.measure).
        applied = min(changes["requests"] - changes["status_errors"], changes.get("within_rounds", changes["requests"]))
        if changes.get("repeated"):
            result["note"] = f"ran out of orders ({changes['repeated']} posts repeated the last status): raise CHANGE_ORDERS"
        result.update(changes=applied, changes_per_s=round(applied / (changes["duration_us"] / 1e6)),
                      change_p99_ms=changes["p99_us"] / 1000, change_errors=changes["status_errors"])
    if moved:
        accepted = moved["requests"] - moved["status_errors"]
        batch = BATCH if with_changes else 1
        result.update(positions=accepted * batch, requests=accepted,
                      positions_per_s=round(accepted * batch / (moved["duration_us"] / 1e6)),
                      position_p99_ms=moved["p99_us"] / 1000, position_errors=moved["status_errors"])
    return result


class Server:
    def __init__(self, binary, work):
        self.port = free_port()
        self.data = os.path.join(work, "data")
        self.log = open(os.path.join(work, "deliveryd.log"), "w")
        self.process = subprocess.Popen(
            [binary, "--listen", f"127.0.0.1:{self.port}", "--data-dir", self.data, "--admin-key", ADMIN, "--apns-topic", "com.example.app",
             # One rider key makes every status change of the load, one merchant key every order:
             # the per-credential limits would otherwise measure themselves.
             "--requests-per-key", "1000000", "--requests-per-app", "1000000"],
            stdout=self.log, stderr=self.log)
        self.pid = self.process.pid
        wait_for(self.port)

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


def main():
    binary = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="rides-")
    try:
        server = Server(binary, work)
        client = TextClient(server.port)
        try:
            merchant = client.call("POST", "/v1/admin/keys", ADMIN, {"role": "merchant", "merchantId": "m-1"})["key"]
            started = time.time()
            riders, changer, slices = setup(client, merchant)
            print(f"setup: {RIDERS} riders x 3 orders, {sum(map(len, slices))} orders for changes, "
                  f"{time.time() - started:.0f} s", flush=True)
            riders_file = os.path.join(work, "riders.txt")
            with open(riders_file, "w") as file:
                file.writelines(f"{rider} {key}\n" for rider, key in riders)
            runs = []
            for round_index in range(ROUNDS):
                settle(client)
                alone = phase(server, work, merchant, changer, slices[2 * round_index], riders_file, None)
                alone["phase"] = f"A{round_index + 1} changes"
                runs.append(alone)
                settle(client)
                mixed = phase(server, work, merchant, changer, slices[2 * round_index + 1], riders_file, RATE)
                mixed["phase"] = f"B{round_index + 1} changes+positions"
                runs.append(mixed)
            settle(client)
            flat_out = phase(server, work, merchant, changer, [], riders_file, 0, with_changes=False, connections=16)
            flat_out["phase"] = "C positions alone"
            runs.append(flat_out)
            outcomes = positions_counted(client)
        finally:
            server.stop()
        report(runs, outcomes)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(runs, outcomes):
    columns = ["changes_per_s", "change_p99_ms", "positions_per_s", "position_p99_ms", "cpu_s", "change_errors",
               "position_errors"]
    print(f"{'phase':<24}" + "".join(f"{column:>17}" for column in columns))
    for run in runs:
        print(f"{run['phase']:<24}" + "".join(f"{str(run.get(column, '')):>17}" for column in columns))
    print("position outcomes:", json.dumps(outcomes))
    alone = [run for run in runs if run["phase"].startswith("A")]
    mixed = [run for run in runs if run["phase"].startswith("B")]
    flat = runs[-1]
    changes = sum(run["changes_per_s"] for run in alone) / len(alone)
    changes_mixed = sum(run["changes_per_s"] for run in mixed) / len(mixed)
    cpu_per_change = sum(run["cpu_s"] for run in alone) / sum(run["changes"] for run in alone) * 1e6
    cpu_per_position = flat["cpu_s"] / max(1, flat["positions"]) * 1e6
    positions_mixed = sum(run["positions_per_s"] for run in mixed) / len(mixed)
    path = os.environ.get("RESULTS", os.path.join(os.getcwd(), "bench/results/rides.json"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as file:
        json.dump({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "riders": RIDERS, "rate": RATE,
                   "batch": BATCH,
                   "duration_s": DURATION, "runs": runs, "outcomes": outcomes}, file, indent=2)
    # A B phase that posted far more than RATE measured another load: say so rather than report it.
    paced = [run for run in mixed if run["positions_per_s"] <= 1.2 * RATE]
    if len(paced) < len(mixed):
        sys.exit(f"positions were not paced to {RATE}/s: " + ", ".join(str(run["positions_per_s"]) for run in mixed))
    exhausted = [run["phase"] for run in alone + mixed if run.get("note")]
    if exhausted:
        sys.exit("phases ran out of orders, their rates are not comparable (raise CHANGE_ORDERS): " + ", ".join(exhausted))
    print(f"batch={BATCH} changes_per_s={changes:.0f} changes_with_positions_per_s={changes_mixed:.0f} "
          f"slowdown_pct={100 * (1 - changes_mixed / changes):.1f} positions_per_s={positions_mixed:.0f} "
          f"max_positions_per_s={flat['positions_per_s']} cpu_us_per_change={cpu_per_change:.0f} "
          f"cpu_us_per_position={cpu_per_position:.0f} position_to_change_cost={cpu_per_position / cpu_per_change:.2f}")


if __name__ == "__main__":
    main()
