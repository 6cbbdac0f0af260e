"""Status changes end to end: deliveryd (release) against a Python peer, then at scale, with 10,000
connections, and with a slow APNs. Every change flows to an HTTP/2 APNs sink over TLS.

usage: e2e.py DELIVERYD_BINARY   (from the repository root, with the bench virtualenv; see bench/e2e.sh)
Environment: ORDERS (live orders per run, default 30000), DURATION (seconds of load, default 15),
CONNECTIONS (status posters, default 64), POLLERS (customers polling, default 32),
SCALE_ORDERS (orders already in the database for the scale run, default 1000000), RUNS (comma list
of: deliveryd, postgres, two-nodes, peer, durability, durability-scale, scale, connections, slow-apns, webhooks,
android; default all but two-nodes, webhooks, android, durability and durability-scale; two-nodes: two deliveryd nodes on one PostgreSQL behind nginx
as the load balancer, with each node's, PostgreSQL's and nginx's CPU per change; durability: deliveryd and the peer both with a log sender, both at
synchronous=full and both at normal, alternated; durability-scale: the same, each side with SCALE_ORDERS delivered
orders already stored),
ROUNDS (webhooks: alternations, default 3), RESULTS (JSON path),
DELIVERYD_ARGS (more flags for deliveryd), ACCESS_LOG (on: deliveryd's default access log in every run), STATS_POLL (with 1: the dashboard's poll, GET
/v1/admin/stats?history=all every 200 ms during the load, once the history holds STATS_SAMPLES
samples, default 1800: a full hour and day; reports stats_p99_ms, stats_bytes, history_samples).
Prints a table and ends with one line:
    changes_per_s=N peer_changes_per_s=N ratio=R p99_ms=X peer_p99_ms=Y postgres_changes_per_s=N
    postgres_ratio=R postgres_peer_ratio=R postgres_p99_ms=X two_nodes_changes_per_s=N two_nodes_ratio=R
    two_nodes_p99_ms=X scale_ratio=S conn_rss_mb=M slow_apns_p99_ratio=Q
The webhooks run alternates deliveryd without and with a webhook endpoint for the merchant,
subscribed to every event, posting to nginx on loopback (answering 204; with WEBHOOK_TLS=1 over TLS,
HTTP/2 offered), ROUNDS times each, with deliveryd's defaults (access log on); each run reports the
receiver's CPU per change and the machine's idle share during the load; it reports the medians and
    webhooks_off_changes_per_s=N webhooks_on_changes_per_s=N webhooks_ratio=R webhooks_delivered=N
The android run alternates orders with one iPhone each and orders with an iPhone and an Android phone
each (FCM's HTTP v1 API at the same nghttpd sink, with the OAuth 2 token endpoint there too), ROUNDS
times each, with deliveryd's defaults (access log on); it reports the medians and
    android_off_changes_per_s=N android_on_changes_per_s=N android_ratio=R android_cpu_ratio=R android_pushes=N
The postgres run is deliveryd on a PostgreSQL server of its own (Debian's, `make test` installs it;
initdb into a temporary directory, run as the postgres user, its defaults: fsync and synchronous_commit on).
"""
import concurrent.futures
import http.client
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from benchlib import certificates, free_port, wait_for

ROOT = os.getcwd()
ORDERS = int(os.environ.get("ORDERS", "30000"))
DURATION = int(os.environ.get("DURATION", "15"))
CONNECTIONS = int(os.environ.get("CONNECTIONS", "64"))
POLLERS = int(os.environ.get("POLLERS", "32"))
SCALE_ORDERS = int(os.environ.get("SCALE_ORDERS", "1000000"))
RUNS = os.environ.get("RUNS", "deliveryd,postgres,peer,scale,connections,slow-apns").split(",")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
POSTGRES_BIN = "/usr/lib/postgresql/15/bin"
ADMIN = "bench-admin-key-0123456789"
PEER_MERCHANT = "peer-merchant-key-0123456789"
PEER_RIDER = "peer-rider-key-0123456789"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def machine_cpu_seconds():
    """All cores' time since boot and the part of it idle (or waiting for I/O), from /proc/stat."""
    with open("/proc/stat") as stat:
        fields = [int(field) for field in stat.readline().split()[1:]]
    return sum(fields[:8]) / TICKS, (fields[3] + fields[4]) / TICKS


def tree_cpu_seconds(pid):
    """CPU seconds of a process, its children that ended, and its live children: a PostgreSQL server's
    backends, nginx's worker."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    total = sum(int(field) for field in fields[11:15]) / TICKS
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            for child in children.read().split():
                try:
                    total += cpu_seconds(int(child))
                except FileNotFoundError:
                    pass
    except FileNotFoundError:
        pass
    return total


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] if ordered else 0.0


def token_for(index):
    return f"{index:064x}"


class Client:
    """One keep-alive HTTP/1.1 connection per thread."""

    def __init__(self, port):
        self.port = port
        self.local = threading.local()

    def call(self, method, path, bearer, body=None):
        if not hasattr(self.local, "connection"):
            self.local.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        headers = {"Authorization": f"Bearer {bearer}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        self.local.connection.request(method, path, body=data, headers=headers)
        response = self.local.connection.getresponse()
        payload = response.read()
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {payload[:200]!r}")
        return json.loads(payload) if payload else None


def create_orders(client, merchant_key, count, prefix, android=False):
    """count orders, each with one Live Activity (and with `android` an Android phone too) and rider r-1;
    returns [(order id, tracking token)]."""
    eta = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))

    def one(index):
        created = client.call("POST", "/v1/orders", merchant_key, {
            "number": f"{prefix}-{index}", "merchantName": "Bench Kitchen",
            "items": [{"name": "Noodles", "quantity": 1, "price": 9.5}],
            "customer": {"id": f"c-{index}", "name": "Ana", "phone": "+49 30 1234567", "locale": "en"},
            "address": "Somewhere 1", "payment": {"method": "cash"}, "estimatedArrival": eta})
        order_id, tracking = created["order"]["id"], created["trackingToken"]
        client.call("PUT", f"/v1/orders/{order_id}/activities/a", tracking,
                    {"pushToken": token_for(index), "environment": "development"})
        if android:
            client.call("PUT", f"/v1/orders/{order_id}/activities/android", tracking,
                        {"platform": "android", "pushToken": f"fcm-{token_for(index)}"})
        client.call("PUT", f"/v1/orders/{order_id}/rider", merchant_key, {"riderId": "r-1", "name": "Sam Rider"})
        return order_id, tracking

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        return list(pool.map(one, range(count)))


def wrk(script, port, connections, threads, duration, environment):
    command = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--timeout", "10s",
               "-s", os.path.join(ROOT, "bench/e2e", script), f"http://127.0.0.1:{port}"]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, **environment, "WRK_THREADS": str(threads)})


def wrk_result(process):
    output, _ = process.communicate(timeout=DURATION + 120)
    for line in output.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    sys.exit(f"wrk printed no result:\n{output}")


class Sink:
    """nghttpd answering every push to a known device token with 200, as a fast APNs would, and every
    FCM message of the project `bench` and every OAuth 2 token request, as fast FCM and Google would."""

    def __init__(self, work, tokens):
        self.port = free_port()
        device = os.path.join(work, "htdocs/3/device")
        os.makedirs(device, exist_ok=True)
        for index in range(tokens):
            open(os.path.join(device, token_for(index)), "w").close()
        os.makedirs(os.path.join(work, "htdocs/v1/projects/bench"), exist_ok=True)
        with open(os.path.join(work, "htdocs/v1/projects/bench/messages:send"), "w") as file:
            file.write('{"name": "projects/bench/messages/1"}')
        with open(os.path.join(work, "htdocs/token"), "w") as file:
            file.write('{"access_token": "bench-access-token", "expires_in": 3600, "token_type": "Bearer"}')
        self.process = subprocess.Popen(
            ["nghttpd", "--workers=1", "--max-concurrent-streams=1000", f"--htdocs={work}/htdocs", str(self.port),
             f"{work}/server.key", f"{work}/server.pem"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.port)

    @property
    def url(self):
        return f"https://127.0.0.1:{self.port}"


class Simulator:
    """The test suite's APNs simulator (checks every request); DELAY_MS answers late."""

    def __init__(self, work, delay_ms):
        self.port = free_port()
        control = os.path.join(work, f"control-{self.port}.json")
        with open(control, "w") as file:
            json.dump({"*": {"delay_ms": delay_ms}}, file)
        self.process = subprocess.Popen([
            sys.executable, "Tests/apns-simulator/simulator.py", "--port", str(self.port),
            "--cert", f"{work}/server.pem", "--key", f"{work}/server.key", "--public-key", f"{work}/signing.pub",
            "--record", os.path.join(work, f"record-{self.port}.jsonl"), "--control", control])
        wait_for(self.port)

    @property
    def url(self):
        return f"https://127.0.0.1:{self.port}"


class WebhookSink:
    """nginx answering every webhook POST with 204, as a merchant's fast receiver would."""

    def __init__(self, work, tls=False):
        self.port = free_port()
        self.tls = tls
        directory = os.path.join(work, f"nginx-{self.port}")
        listen = (f"listen 127.0.0.1:{self.port} ssl http2;\n        ssl_certificate {work}/server.pem;\n"
                  f"        ssl_certificate_key {work}/server.key;") if tls else f"listen 127.0.0.1:{self.port};"
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "nginx.conf"), "w") as file:
            file.write(f"""daemon off;
worker_processes 1;
pid {directory}/nginx.pid;
error_log {directory}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {directory};
    server {{
        {listen}
        location / {{ return 204; }}
    }}
}}
""")
        self.process = subprocess.Popen(["nginx", "-c", os.path.join(directory, "nginx.conf")],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.port)

    @property
    def url(self):
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}/deliveryd-events"


class Deliveryd:
    name = "deliveryd"

    def __init__(self, binary, work, apns_url):
        self.binary, self.apns_url = binary, apns_url
        self.data = os.path.join(work, f"data-{uuid.uuid4().hex[:8]}")
        self.work = work
        self.process = None
        self.extra = []
        # ACCESS_LOG=on keeps deliveryd's default (the access log to stdout, here discarded).
        self.access_log = [] if os.environ.get("ACCESS_LOG") == "on" else ["--access-log", "off"]
        # With a URL, the merchant gets a webhook endpoint there, subscribed to every event.
        self.webhook_url = None
        # With a service-account file, FCM at the sink, and every order gets an Android phone too.
        self.fcm_account = None

    def start(self):
        self.port = free_port()
        self.process = subprocess.Popen([
            self.binary, "--listen", f"127.0.0.1:{self.port}", "--data-dir", self.data, "--admin-key", ADMIN,
        ] + self.access_log + self.sender_arguments() + [
            # One merchant key and one rider key stand for every merchant and rider of the load, and
            # a few tracking tokens for every polling customer: the per-credential limits, which share
            # the machine between tenants, would otherwise measure themselves.
            "--requests-per-key", "1000000", "--requests-per-app", "1000000",
        ] + self.fcm_arguments() + self.extra + os.environ.get("DELIVERYD_ARGS", "").split(),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.port)
        self.client = Client(self.port)

    def watched(self):
        """The processes whose CPU the run reports: the server's own ("server", or "node-N") and the
        ones it relies on beside it (`postgres`, `balancer`, the webhook `receiver`)."""
        processes = {"server": self.process.pid}
        if getattr(self, "webhook_receiver", None):
            processes["receiver"] = self.webhook_receiver.process.pid
        return processes

    def sender_arguments(self):
        """APNs at the sink; with `log_sender`, no key: deliveryd's log sender records every push."""
        if getattr(self, "log_sender", False):
            return ["--apns-topic", "com.example.app"]
        return ["--apns-key-file", f"{self.work}/signing.pem", "--apns-key-id", "ABC123DEFG",
                "--apns-team-id", "DEF123GHIJ", "--apns-topic", "com.example.app",
                "--apns-development-url", self.apns_url, "--apns-production-url", self.apns_url,
                "--apns-ca-file", f"{self.work}/ca.pem"]

    def fcm_arguments(self):
        if not self.fcm_account:
            return []
        return ["--fcm-service-account-file", self.fcm_account, "--fcm-url", self.apns_url,
                "--fcm-ca-file", f"{self.work}/ca.pem"]

    def merchant_key(self):
        return self.client.call("POST", "/v1/admin/keys", ADMIN, {"role": "merchant", "merchantId": "m-1"})["key"]

    def rider_key(self):
        return self.client.call("POST", "/v1/admin/keys", ADMIN, {"role": "rider", "merchantId": "m-1", "riderId": "r-1"})["key"]

    @property
    def database(self):
        return os.path.join(self.data, "deliveryd.sqlite3")

    def reader(self):
        return sqlite3.connect(f"file:{self.database}?mode=ro", uri=True)

    def backlog(self, connection):
        pushes = connection.execute("SELECT count(*) FROM outbox WHERE state IN ('pending', 'sending')").fetchone()[0]
        if not self.webhook_url:
            return pushes
        # Retries and replays are rows; new events wait past their endpoint's cursor.
        retries = connection.execute(
            "SELECT count(*) FROM webhook_deliveries WHERE state IN ('pending', 'sending')").fetchone()[0]
        try:
            unread = connection.execute(
                """SELECT (SELECT count(*) FROM webhook_endpoints AS e JOIN webhook_events AS ev
                   ON ev.merchant_id = e.merchant_id AND ev.txid = e.cursor_txid AND ev.seq > e.cursor_seq
                   WHERE e.enabled = 1) + (SELECT count(*) FROM webhook_endpoints AS e JOIN webhook_events AS ev
                   ON ev.merchant_id = e.merchant_id AND ev.txid > e.cursor_txid WHERE e.enabled = 1)""").fetchone()[0]
        except sqlite3.OperationalError:
            unread = 0  # a build from before the streams: every delivery is a row
        return pushes + retries + unread

    def webhooks_delivered(self, connection):
        return connection.execute(
            "SELECT count(*) FROM webhook_attempts WHERE http_status BETWEEN 200 AND 299").fetchone()[0]

    def commit_to_request_ms(self, connection, since_ms):
        # attempted_at is when the push's request went out; its change committed just after the
        # newest event of its order before then (the event's time is taken before the COMMIT).
        rows = connection.execute("""
            SELECT p.attempted_at - (SELECT max(e.at) FROM order_events e
                                     WHERE e.order_id = p.order_id AND e.at <= p.attempted_at)
            FROM push_log p WHERE p.attempted_at >= ? AND p.http_status = 200""", (since_ms,)).fetchall()
        return [row[0] for row in rows if row[0] is not None]

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)


class PostgresServer:
    """A PostgreSQL server of the benchmark's own, with the server's default durability."""

    def __init__(self):
        # Not under the benchmark's own directory: that is root's alone, and the server runs as postgres.
        self.directory = tempfile.mkdtemp(prefix="e2e-postgres-")
        shutil.chown(self.directory, "postgres", "postgres")
        self.port = free_port()
        self.as_postgres(f"{POSTGRES_BIN}/initdb", "-D", f"{self.directory}/data", "-A", "trust", "-U", "postgres")
        self.as_postgres(f"{POSTGRES_BIN}/pg_ctl", "-D", f"{self.directory}/data", "-l", f"{self.directory}/log",
                         "-w", "-o", f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1"
                         " -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track_planning=on", "start")
        self.psql("postgres", "CREATE ROLE deliveryd LOGIN PASSWORD 'deliveryd'")
        self.psql("postgres", "CREATE DATABASE deliveryd OWNER deliveryd")
        self.psql("deliveryd", "CREATE EXTENSION pg_stat_statements")
        self.url = f"postgresql://deliveryd:deliveryd@127.0.0.1:{self.port}/deliveryd"

    def statements(self, top=16):
        """Where the server's time went: the statements that took most of it (planning and running),
        with calls, mean ms running, and total ms planning."""
        rows = self.psql("deliveryd", f"""
            SELECT round(total_exec_time)::bigint, calls, round(mean_exec_time::numeric, 3),
                   round(total_plan_time)::bigint, regexp_replace(left(query, 90), '\\s+', ' ', 'g')
            FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT {top}""")
        return [{"total_ms": int(row[0]), "calls": int(row[1]), "mean_ms": float(row[2]), "plan_ms": int(row[3]),
                 "query": row[4]} for row in rows]

    def postmaster_pid(self):
        with open(f"{self.directory}/data/postmaster.pid") as file:
            return int(file.readline())

    @staticmethod
    def as_postgres(*command):
        subprocess.run(["runuser", "-u", "postgres", "--", *command], check=True, timeout=120,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def psql(self, database, sql):
        result = subprocess.run(
            [f"{POSTGRES_BIN}/psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database,
             "-At", "-v", "ON_ERROR_STOP=1", "-c", sql], check=True, timeout=120, capture_output=True, text=True)
        return [line.split("|") for line in result.stdout.splitlines() if line]

    def stop(self):
        self.as_postgres(f"{POSTGRES_BIN}/pg_ctl", "-D", f"{self.directory}/data", "-m", "fast", "-w", "stop")
        shutil.rmtree(self.directory, ignore_errors=True)


class PsqlReader:
    """What the benchmark reads of deliveryd's tables, through psql: `?` parameters are whole numbers."""

    def __init__(self, server):
        self.server = server

    def execute(self, sql, parameters=()):
        for value in parameters:
            sql = sql.replace("?", str(int(value)), 1)
        return PsqlRows([[int(value) if value else None for value in row]
                         for row in self.server.psql("deliveryd", sql)])

    def __enter__(self):
        return self

    def __exit__(self, *arguments):
        return False


class PsqlRows:
    def __init__(self, rows):
        self.rows = rows

    def fetchone(self):
        return self.rows[0] if self.rows else None

    def fetchall(self):
        return self.rows

    def __iter__(self):
        return iter(self.rows)


class DeliverydOnPostgres(Deliveryd):
    name = "deliveryd-postgres"

    def __init__(self, binary, work, apns_url, postgres):
        super().__init__(binary, work, apns_url)
        self.postgres = postgres
        self.extra = ["--database-url", postgres.url]

    def reader(self):
        return PsqlReader(self.postgres)

    def watched(self):
        return {"server": self.process.pid, "postgres": self.postgres.postmaster_pid()}

    def before_load(self):
        """The tables' statistics as a running service has them, as pgbench's set-up does: the orders
        were loaded seconds ago, before autovacuum's first round, and statements prepared while the
        tables were empty would otherwise keep their plans for empty tables (sequential scans of every
        row where a primary key finds one). The statements' figures are the load's alone."""
        self.postgres.psql("deliveryd", "ANALYZE")
        self.postgres.psql("deliveryd", "SELECT pg_stat_statements_reset()")


class LoadBalancer:
    """nginx in front of deliveryd nodes, as docs/deployment.md sets it up: round robin over keep-alive
    connections to each node, one worker process."""

    def __init__(self, work, ports):
        self.port = free_port()
        directory = os.path.join(work, f"balancer-{self.port}")
        os.makedirs(directory, exist_ok=True)
        upstreams = "".join(f"        server 127.0.0.1:{port};\n" for port in ports)
        with open(os.path.join(directory, "nginx.conf"), "w") as file:
            file.write(f"""daemon off;
worker_processes 1;
pid {directory}/nginx.pid;
error_log {directory}/error.log;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {directory};
    proxy_temp_path {directory};
    upstream deliveryd {{
{upstreams}        keepalive 128;
    }}
    server {{
        listen 127.0.0.1:{self.port};
        location / {{
            proxy_pass http://deliveryd;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header X-Forwarded-For $remote_addr;
        }}
    }}
}}
""")
        self.process = subprocess.Popen(["nginx", "-c", os.path.join(directory, "nginx.conf")],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.port)

    def stop(self):
        self.process.send_signal(signal.SIGQUIT)
        self.process.wait(timeout=30)


class TwoNodesOnPostgres(Deliveryd):
    """Two deliveryd nodes on one PostgreSQL server behind the load balancer. Every process (both
    nodes, PostgreSQL, nginx and the load generator) shares this machine's cores."""
    name = "two-nodes"

    def __init__(self, binary, work, apns_url, postgres):
        super().__init__(binary, work, apns_url)
        self.postgres = postgres
        # One sealing key for every node: a reply kept by one is replayed by another.
        sealing_key = os.path.join(work, f"sealing-{uuid.uuid4().hex[:8]}.key")
        self.nodes = []
        for index in range(2):
            node = DeliverydOnPostgres(binary, work, apns_url, postgres)
            node.extra += ["--sealing-key-file", sealing_key, "--node-name", f"node-{index + 1}",
                           "--trusted-proxies", "127.0.0.1"]
            self.nodes.append(node)

    def start(self):
        for node in self.nodes:
            node.start()
        self.balancer = LoadBalancer(self.work, [node.port for node in self.nodes])
        self.port = self.balancer.port
        self.process = self.nodes[0].process
        self.client = Client(self.port)

    def watched(self):
        processes = {f"node-{index + 1}": node.process.pid for index, node in enumerate(self.nodes)}
        processes.update(postgres=self.postgres.postmaster_pid(), balancer=self.balancer.process.pid)
        return processes

    def reader(self):
        return PsqlReader(self.postgres)

    def stop(self):
        self.balancer.stop()
        for node in self.nodes:
            node.stop()


class Peer:
    name = "python-peer"

    def __init__(self, work, apns_url, synchronous="FULL", sender="apns"):
        self.work, self.apns_url = work, apns_url
        self.synchronous, self.sender = synchronous, sender
        self.data = os.path.join(work, f"peer-{uuid.uuid4().hex[:8]}.sqlite")

    def start(self):
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--app-dir", os.path.join(ROOT, "bench/peer"), "app:app",
             "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning", "--no-access-log"],
            env={**os.environ, "PEER_DB": self.data, "PEER_MERCHANT_KEY": PEER_MERCHANT, "PEER_RIDER_KEY": PEER_RIDER,
                 "PEER_APNS_URL": self.apns_url, "PEER_APNS_CA": f"{self.work}/ca.pem",
                 "PEER_SYNCHRONOUS": self.synchronous, "PEER_SENDER": self.sender},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL if self.sender == "log" else None)
        wait_for(self.port)
        self.client = Client(self.port)

    def watched(self):
        return {"server": self.process.pid}

    def fcm_arguments(self):
        if not self.fcm_account:
            return []
        return ["--fcm-service-account-file", self.fcm_account, "--fcm-url", self.apns_url,
                "--fcm-ca-file", f"{self.work}/ca.pem"]

    def merchant_key(self):
        return PEER_MERCHANT

    def rider_key(self):
        return PEER_RIDER

    @property
    def database(self):
        return self.data

    def reader(self):
        return sqlite3.connect(f"file:{self.database}?mode=ro", uri=True)

    def backlog(self, connection):
        return connection.execute("SELECT count(*) FROM outbox WHERE state = 'pending'").fetchone()[0]

    def commit_to_request_ms(self, connection, since_ms):
        # sent_at is taken after the answer: an upper bound of the request's moment.
        rows = connection.execute(
            "SELECT sent_at - created_at FROM outbox WHERE state = 'sent' AND created_at >= ?", (since_ms,))
        return [row[0] for row in rows]

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)


class StatsPoller(threading.Thread):
    """The dashboard's poll during the load: the whole history with every answer, as a reload asks."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.latencies_ms, self.bytes, self.stopping = port, [], 0, threading.Event()
        self.nice = 0

    @staticmethod
    def fetch(port, connection=None):
        """One answer and its time to the last byte; over `connection` (kept open, as a browser keeps
        its connection to the page's server) or a new one."""
        own = connection is None
        if own:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        started = time.perf_counter()
        connection.request("GET", "/v1/admin/stats?history=all", headers={"Authorization": f"Bearer {ADMIN}"})
        response = connection.getresponse()
        payload = response.read()
        elapsed = (time.perf_counter() - started) * 1000
        if own:
            connection.close()
        if response.status != 200:
            raise RuntimeError(f"stats: {response.status} {payload[:200]!r}")
        return elapsed, payload

    @staticmethod
    def samples(port):
        _, payload = StatsPoller.fetch(port)
        return sum(len(tier["timesMs"]) for tier in json.loads(payload)["history"]["tiers"])

    def run(self):
        # A dashboard's browser runs on the operator's machine, not on the two cores the load keeps
        # busy: as root, this thread runs at a higher priority (nice -10) so that the figure is the
        # server's answer and the transfer, not this client waiting for a core. deliveryd and the
        # load keep their own priority. `stats_poller_nice` says which it was.
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), -10)
            self.nice = -10
        except PermissionError:
            self.nice = 0
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        while not self.stopping.wait(0.2):
            elapsed, payload = self.fetch(self.port, connection)
            self.latencies_ms.append(elapsed)
            self.bytes = len(payload)
        connection.close()

    @staticmethod
    def server_buckets(port):
        """deliveryd's own histogram of the stats route (request read to answer queued for the socket):
        cumulative counts by upper bound in seconds."""
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.request("GET", "/metrics", headers={"Authorization": f"Bearer {ADMIN}"})
        text = connection.getresponse().read().decode()
        connection.close()
        buckets = {}
        for line in text.splitlines():
            if line.startswith("deliveryd_http_request_duration_seconds_bucket{") \
                    and 'route="/v1/admin/stats"' in line and 'method="GET"' in line:
                bound = line.split('le="', 1)[1].split('"', 1)[0]
                buckets[float("inf") if bound == "+Inf" else float(bound)] = int(float(line.rsplit(" ", 1)[1]))
        return buckets

    @staticmethod
    def server_figures(before, after):
        """The share of the run's stats answers deliveryd gave within 5 ms, and the smallest bound under
        which 99 % of them fall (the histogram's resolution)."""
        counts = {bound: after.get(bound, 0) - before.get(bound, 0) for bound in after}
        total = counts.get(float("inf"), 0)
        if not total:
            return {}
        p99 = next(bound for bound in sorted(counts) if counts[bound] >= 0.99 * total)
        return {"stats_server_within_5ms": round(counts.get(0.005, 0) / total, 4),
                "stats_server_p99_bound_ms": p99 * 1000}


def writer_figures(server):
    """deliveryd's SQLite writer counters from /metrics, or None for a server without them."""
    if not isinstance(server, Deliveryd) or getattr(server, "name", "") != "deliveryd":
        return None
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    connection.request("GET", "/metrics", headers={"Authorization": f"Bearer {ADMIN}"})
    text = connection.getresponse().read().decode()
    connection.close()
    names = {"deliveryd_storage_commits_total": "commits", "deliveryd_storage_writes_total": "writes",
             "deliveryd_storage_sync_seconds_total": "sync",
             "deliveryd_storage_transaction_seconds_total": "transaction"}
    figures = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and (parts[0] in names or parts[0] == "deliveryd_storage_syncs_total"):
            figures[names.get(parts[0], "syncs")] = float(parts[1])
    # Syncs beside the writer (a build that syncs inside COMMIT has no such counter).
    return figures if all(name in figures for name in names.values()) else None


def wait_for_empty_outbox(server, timeout=300):
    """Waits until the server has no push left to send (or `timeout` passed); returns what is left."""
    with server.reader() as connection:
        deadline = time.time() + timeout
        while server.backlog(connection) and time.time() < deadline:
            time.sleep(0.2)
        return server.backlog(connection)


def preload(server, count):
    """count delivered orders written straight into the server's file (deliveryd's schema or the
    peer's), each with its two status events, a day old."""
    server.start()
    server.stop()
    peer = isinstance(server, Peer)
    connection = sqlite3.connect(server.database)
    connection.execute("PRAGMA synchronous=OFF")
    stamp = int(time.time() * 1000) - 86_400_000
    batch = 50_000
    for start in range(0, count, batch):
        indexes = range(start, min(count, start + batch))
        if peer:
            connection.executemany(
                """INSERT INTO orders (id, merchant_id, number, merchant_name, items_json, customer_json, address,
                   status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                [(f"pre-{index}", "m-pre", f"P-{index}", "Old Kitchen", '[{"name":"Tea","quantity":1,"price":2}]',
                  '{"id":"c-%d","name":"Ana","phone":"+49 30 1234567","locale":"en"}' % index, "Somewhere 1",
                  "delivered", stamp, stamp) for index in indexes])
            event = "INSERT INTO order_events (order_id, from_status, to_status, at) VALUES (?, ?, ?, ?)"
        else:
            connection.executemany(
                """INSERT INTO orders (id, merchant_id, number, merchant_name, items_json, customer_id, customer_name,
                   customer_phone, customer_locale, address, payment_method, status, estimated_arrival, created_at,
                   updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                [(f"pre-{index}", "m-pre", f"P-{index}", "Old Kitchen", '[{"name":"Tea","quantity":1,"price":2}]',
                  f"c-{index}", "Ana", "+49 30 1234567", "en", "Somewhere 1", "cash", "delivered", stamp, stamp, stamp)
                 for index in indexes])
            event = ("INSERT INTO order_events (order_id, kind, from_status, to_status, actor, at) "
                     "VALUES (?, 'status', ?, ?, 'merchant', ?)")
        connection.executemany(
            event, [(f"pre-{index}", status_from, status_to, stamp) for index in indexes
                    for status_from, status_to in (("placed", "preparing"), ("preparing", "delivered"))])
        connection.commit()
    connection.close()


def measure(server, connections=CONNECTIONS, pollers=POLLERS, idle=0, preloaded=0):
    """Sets up ORDERS orders, then DURATION seconds of status changes and polls; waits for the pushes."""
    if preloaded:
        preload(server, preloaded)
    server.start()
    try:
        merchant, rider = server.merchant_key(), server.rider_key()
        if getattr(server, "webhook_url", None):
            server.client.call("POST", "/v1/webhooks", merchant, {"url": server.webhook_url})
        setup_started = time.time()
        orders = create_orders(server.client, merchant, ORDERS, f"B{uuid.uuid4().hex[:6]}",
                               android=bool(getattr(server, "fcm_account", None)))
        setup_seconds = time.time() - setup_started
        work = tempfile.mkdtemp(prefix="e2e-run-")
        with open(f"{work}/orders.txt", "w") as file:
            file.writelines(f"{order}\n" for order, _ in orders)
        with open(f"{work}/tracking.txt", "w") as file:
            file.writelines(f"{order} {tracking}\n" for order, tracking in orders)
        # Registering an activity may push its current state: let that settle before measuring.
        wait_for_empty_outbox(server)
        holder = None
        if idle:
            holder = subprocess.Popen([sys.executable, "bench/idle_connections.py", str(server.port),
                                       str(server.process.pid), str(idle), str(DURATION + 60)],
                                      stdout=subprocess.PIPE, text=True)
            wait_line = holder.stdout.readline()
            if not wait_line.startswith("holding"):
                sys.exit(f"idle connections: {wait_line}")
        poller = None
        if os.environ.get("STATS_POLL") == "1":
            wanted = int(os.environ.get("STATS_SAMPLES", "1800"))
            deadline = time.time() + 600
            while StatsPoller.samples(server.port) < wanted and time.time() < deadline:
                time.sleep(1)
            poller = StatsPoller(server.port)
            stats_buckets_before = StatsPoller.server_buckets(server.port)
            poller.start()
        if hasattr(server, "before_load"):
            server.before_load()
        since_ms = int(time.time() * 1000)
        watched = server.watched()
        cpu_before = {name: tree_cpu_seconds(pid) for name, pid in watched.items()}
        machine_before = machine_cpu_seconds()
        writer_before = writer_figures(server)
        started = time.time()
        posters = wrk("status.lua", server.port, connections, 2, DURATION,
                      {"ORDERS_FILE": f"{work}/orders.txt", "MERCHANT_KEY": merchant, "RIDER_KEY": rider})
        polls = wrk("poll.lua", server.port, pollers, 1, DURATION, {"TRACKING_FILE": f"{work}/tracking.txt"}) \
            if pollers else None
        status = wrk_result(posters)
        poll = wrk_result(polls) if polls else None
        machine_after = machine_cpu_seconds()
        writer_after = writer_figures(server)
        # What the load left to send: a webhook backlog is drained after it, its CPU counted.
        backlog_at_end = None
        if getattr(server, "webhook_url", None):
            with server.reader() as connection:
                backlog_at_end = server.backlog(connection)
        stats = None
        if poller:
            poller.stopping.set()
            poller.join()
            stats = {"stats_p99_ms": round(percentile(poller.latencies_ms, 0.99), 2),
                     "stats_p50_ms": round(percentile(poller.latencies_ms, 0.5), 2),
                     "stats_p90_ms": round(percentile(poller.latencies_ms, 0.9), 2),
                     "stats_polls": len(poller.latencies_ms), "stats_bytes": poller.bytes,
                     "history_samples": StatsPoller.samples(server.port), "stats_poller_nice": poller.nice,
                     **StatsPoller.server_figures(stats_buckets_before, StatsPoller.server_buckets(server.port))}
        rss = sum(rss_mb(pid) for name, pid in watched.items() if name == "server" or name.startswith("node-"))
        if holder:
            holder.send_signal(signal.SIGTERM)
            holder.wait()
        backlog = wait_for_empty_outbox(server)
        drained_after = time.time() - started
        with server.reader() as connection:
            cpu_by_process = {name: tree_cpu_seconds(pid) - cpu_before[name] for name, pid in watched.items()}
            delays = server.commit_to_request_ms(connection, since_ms)
            webhooks = server.webhooks_delivered(connection) if getattr(server, "webhook_url", None) else None
        shutil.rmtree(work, ignore_errors=True)
    finally:
        server.stop()
    # status.lua walks every order through its four statuses in order. Once every order is delivered
    # its posts repeat `delivered`: answered, but no change (no row, no push), and far cheaper, so they
    # would inflate the rate and deflate the CPU per change. They are not counted, and the run is
    # marked: a faster server needs more ORDERS for the same DURATION.
    changes = min(status["requests"] - status["status_errors"], status.get("within_rounds", status["requests"]))
    # The server's own CPU: its process, or the sum of its nodes.
    cpu = sum(seconds for name, seconds in cpu_by_process.items() if name == "server" or name.startswith("node-"))
    result = {
        "server": server.name, "setup_requests_per_s": round(3 * ORDERS / setup_seconds),
        "changes": changes, "changes_per_s": round(changes / (status["duration_us"] / 1e6)),
        "errors": status["status_errors"] + status["socket_errors"],
        "post_p50_ms": status["p50_us"] / 1000, "post_p99_ms": status["p99_us"] / 1000,
        "post_p999_ms": status["p999_us"] / 1000, "polls": poll["requests"] if poll else 0,
        "poll_p99_ms": poll["p99_us"] / 1000 if poll else None,
        "pushes": len(delays), "commit_to_apns_p50_ms": percentile(delays, 0.5),
        "commit_to_apns_p99_ms": percentile(delays, 0.99), "backlog_left": backlog,
        "drained_after_s": round(drained_after, 1),
        "cpu_s_per_1000_changes": round(1000 * cpu / max(1, changes), 3), "rss_mb": round(rss, 1),
        "connections": connections + pollers + idle,
        # The share of the machine's cores left idle during the load: near 0 when it is CPU-bound.
        "machine_idle": round(
            (machine_after[1] - machine_before[1]) / max(1e-9, machine_after[0] - machine_before[0]), 3),
    }
    for name, seconds in cpu_by_process.items():
        if name != "server":
            result[f"{name.replace('-', '')}_cpu_s_per_1000_changes"] = round(1000 * seconds / max(1, changes), 3)
    if stats:
        result.update(stats)
    if writer_before and writer_after:
        # The SQLite writer during the load: writes per commit, the disk's sync (per sync when the
        # syncs run beside the writer, else per commit, inside it), commits per sync, and the share of
        # the load's wall time the writer connection was in a transaction.
        commits = writer_after["commits"] - writer_before["commits"]
        syncs = writer_after.get("syncs", 0) - writer_before.get("syncs", 0)
        if commits:
            result["writes_per_commit"] = round((writer_after["writes"] - writer_before["writes"]) / commits, 1)
            result["sync_ms"] = round(1000 * (writer_after["sync"] - writer_before["sync"]) / (syncs or commits), 2)
            if syncs:
                result["commits_per_sync"] = round(commits / syncs, 2)
            result["writer_busy"] = round(
                (writer_after["transaction"] - writer_before["transaction"]) / (status["duration_us"] / 1e6), 2)
    if webhooks is not None:
        result["webhooks_delivered"] = webhooks
        result["backlog_at_end_of_load"] = backlog_at_end
    if status.get("repeated"):
        result["posts_after_last_status"] = status["repeated"]
        result["note"] = (f"ran out of orders: {status['repeated']} posts repeated the last status and are not "
                          "counted, the rate is a lower bound: raise ORDERS")
    elif status["status_errors"]:
        result["note"] = "some changes were refused: see errors"
    return result


def bytes_per_order(database):
    """Bytes on disk per order once retention ran: a day later (sent outbox rows gone) and 30 days later."""
    work = tempfile.mkdtemp(prefix="e2e-size-")
    figures = {}
    try:
        copy = os.path.join(work, "copy.sqlite")
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as source:
            source.execute("VACUUM INTO ?", (copy,))
        connection = sqlite3.connect(copy, isolation_level=None)
        orders = connection.execute("SELECT count(*) FROM orders").fetchone()[0]
        connection.execute("DELETE FROM outbox WHERE state IN ('sent', 'superseded')")
        connection.execute("DELETE FROM idempotency_keys")
        connection.execute("VACUUM")
        figures["bytes_per_order_after_1_day"] = round(os.path.getsize(copy) / orders)
        connection.execute("DELETE FROM push_log")
        connection.execute("DELETE FROM activities WHERE ended_at IS NOT NULL")
        connection.execute("VACUUM")
        figures["bytes_per_order_after_30_days"] = round(os.path.getsize(copy) / orders)
        connection.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return figures


def main():
    binary = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="e2e-")
    results = {}
    sink = None
    try:
        certificates(work)
        sink = Sink(work, ORDERS)
        if "deliveryd" in RUNS:
            server = Deliveryd(binary, work, sink.url)
            results["deliveryd"] = measure(server)
            results["deliveryd"].update(bytes_per_order(server.database))
        if "postgres" in RUNS:
            postgres = PostgresServer()
            try:
                results["postgres"] = measure(DeliverydOnPostgres(binary, work, sink.url, postgres))
                results["postgres"]["statements"] = postgres.statements()
                for statement in results["postgres"]["statements"]:
                    print(f"  {statement['total_ms']:>8} ms {statement['calls']:>8} calls "
                          f"{statement['mean_ms']:>8} ms/call {statement['plan_ms']:>6} ms planning  "
                          f"{statement['query']}")
            finally:
                postgres.stop()
        if "two-nodes" in RUNS:
            postgres = PostgresServer()
            try:
                results["two_nodes"] = measure(TwoNodesOnPostgres(binary, work, sink.url, postgres))
            finally:
                postgres.stop()
        if "peer" in RUNS:
            results["peer"] = measure(Peer(work, sink.url))
        if "durability" in RUNS:
            # The comparison at equal durability, both sides recording pushes with a log sender.
            for mode in ("full", "normal"):
                server = Deliveryd(binary, work, sink.url)
                server.log_sender = True
                server.extra = ["--synchronous", mode]
                results[f"deliveryd_log_{mode}"] = measure(server)
                results[f"peer_log_{mode}"] = measure(Peer(work, sink.url, synchronous=mode.upper(), sender="log"))
        if "durability-scale" in RUNS:
            # The same with SCALE_ORDERS delivered orders already stored on both sides.
            for mode in ("full", "normal"):
                server = Deliveryd(binary, work, sink.url)
                server.log_sender = True
                server.extra = ["--synchronous", mode]
                results[f"deliveryd_log_{mode}_stored"] = measure(server, preloaded=SCALE_ORDERS)
                results[f"peer_log_{mode}_stored"] = measure(
                    Peer(work, sink.url, synchronous=mode.upper(), sender="log"), preloaded=SCALE_ORDERS)
        if "scale" in RUNS:
            results["scale"] = measure(Deliveryd(binary, work, sink.url), preloaded=SCALE_ORDERS)
            results["scale"]["preloaded_orders"] = SCALE_ORDERS
        if "connections" in RUNS:
            results["connections"] = measure(
                Deliveryd(binary, work, sink.url), connections=100, pollers=0, idle=10_000 - 100)
        if "webhooks" in RUNS:
            receiver = WebhookSink(work, tls=os.environ.get("WEBHOOK_TLS") == "1")
            try:
                for round_ in range(ROUNDS):
                    # Alternated, and each round in the other order, so both sides see the same machine.
                    for with_webhooks in ((False, True) if round_ % 2 == 0 else (True, False)):
                        server = Deliveryd(binary, work, sink.url)
                        server.access_log = []
                        server.extra = ["--webhook-urls", "local", "--webhook-ca-file", f"{work}/ca.pem"]
                        if with_webhooks:
                            server.webhook_url = receiver.url
                            server.webhook_receiver = receiver
                        name = f"webhooks_{'on' if with_webhooks else 'off'}_{round_ + 1}"
                        results[name] = measure(server)
                        print(f"{name}: changes_per_s={results[name]['changes_per_s']} "
                              f"cpu_s_per_1000_changes={results[name]['cpu_s_per_1000_changes']} "
                              f"receiver_cpu_s_per_1000_changes={results[name].get('receiver_cpu_s_per_1000_changes')} "
                              f"machine_idle={results[name]['machine_idle']} "
                              f"webhooks_delivered={results[name].get('webhooks_delivered')} "
                              f"backlog_at_end_of_load={results[name].get('backlog_at_end_of_load')} "
                              f"drained_after_s={results[name].get('drained_after_s')}", flush=True)
            finally:
                # SIGQUIT: nginx's master stops its worker first; killed outright, it left the worker running.
                receiver.process.send_signal(signal.SIGQUIT)
                receiver.process.wait(timeout=30)
        if "android" in RUNS:
            account = service_account(work, sink.url)
            for round_ in range(ROUNDS):
                # Alternated, and each round in the other order, so both sides see the same machine.
                for with_android in ((False, True) if round_ % 2 == 0 else (True, False)):
                    server = Deliveryd(binary, work, sink.url)
                    server.access_log = []
                    if with_android:
                        server.fcm_account = account
                    name = f"android_{'on' if with_android else 'off'}_{round_ + 1}"
                    results[name] = measure(server)
                    print(f"{name}: changes_per_s={results[name]['changes_per_s']} "
                          f"cpu_s_per_1000_changes={results[name]['cpu_s_per_1000_changes']} "
                          f"pushes={results[name]['pushes']}", flush=True)
        if "slow-apns" in RUNS:
            for delay in (0, 500):
                simulator = Simulator(work, delay)
                try:
                    results[f"apns_{delay}ms"] = measure(Deliveryd(binary, work, simulator.url), pollers=0)
                finally:
                    simulator.process.kill()
                    simulator.process.wait()
    finally:
        if sink:
            sink.process.kill()
            sink.process.wait()
        shutil.rmtree(work, ignore_errors=True)
    report(results)


def service_account(work, sink_url):
    """A service account of the Firebase project `bench` (a fresh RSA key), its token endpoint the sink's."""
    key = os.path.join(work, "fcm-account.pem")
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key],
                   check=True, capture_output=True)
    path = os.path.join(work, "fcm-account.json")
    with open(key) as pem, open(path, "w") as file:
        json.dump({"type": "service_account", "project_id": "bench", "private_key_id": "bench-1",
                   "private_key": pem.read(), "client_email": "pusher@bench.iam.gserviceaccount.com",
                   "token_uri": f"{sink_url}/token"}, file)
    return path


def report(results):
    columns = ["changes_per_s", "post_p50_ms", "post_p99_ms", "post_p999_ms", "poll_p99_ms",
               "commit_to_apns_p50_ms", "commit_to_apns_p99_ms", "cpu_s_per_1000_changes", "rss_mb", "connections",
               "errors", "backlog_left", "writes_per_commit", "sync_ms", "commits_per_sync", "writer_busy",
               "postgres_cpu_s_per_1000_changes", "node1_cpu_s_per_1000_changes", "node2_cpu_s_per_1000_changes",
               "balancer_cpu_s_per_1000_changes"]
    print(f"{'run':<14}" + "".join(f"{column:>24}" for column in columns))
    for name, result in results.items():
        print(f"{name:<14}" + "".join(f"{str(result.get(column)):>24}" for column in columns))
    path = os.environ.get("RESULTS", os.path.join(ROOT, "bench/results/e2e.json"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as file:
        json.dump({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "orders": ORDERS,
                   "duration_s": DURATION, "results": results}, file, indent=2)
    print(f"saved {path}")

    def get(run, key):
        return results.get(run, {}).get(key)

    ours, theirs = get("deliveryd", "changes_per_s"), get("peer", "changes_per_s")
    on_postgres = get("postgres", "changes_per_s")
    scale = get("scale", "changes_per_s")
    slow, fast = get("apns_500ms", "post_p99_ms"), get("apns_0ms", "post_p99_ms")
    fields = {
        "changes_per_s": ours, "peer_changes_per_s": theirs,
        "ratio": f"{ours / theirs:.2f}" if ours and theirs else None,
        "p99_ms": get("deliveryd", "post_p99_ms"), "peer_p99_ms": get("peer", "post_p99_ms"),
        "postgres_changes_per_s": on_postgres,
        "postgres_ratio": f"{on_postgres / ours:.2f}" if on_postgres and ours else None,
        "postgres_peer_ratio": f"{on_postgres / theirs:.2f}" if on_postgres and theirs else None,
        "postgres_p99_ms": get("postgres", "post_p99_ms"),
        "two_nodes_changes_per_s": get("two_nodes", "changes_per_s"),
        "two_nodes_ratio": f"{get('two_nodes', 'changes_per_s') / on_postgres:.2f}"
        if get("two_nodes", "changes_per_s") and on_postgres else None,
        "two_nodes_p99_ms": get("two_nodes", "post_p99_ms"),
        "scale_ratio": f"{ours / scale:.2f}" if ours and scale else None,
        "conn_rss_mb": get("connections", "rss_mb"),
        "slow_apns_p99_ratio": f"{slow / fast:.2f}" if slow and fast else None,
    }
    def median(side, key, run="webhooks"):
        values = sorted(result[key] for name, result in results.items()
                        if name.startswith(f"{run}_{side}_") and result.get(key) is not None)
        return values[len(values) // 2] if values else None

    off, on = median("off", "changes_per_s"), median("on", "changes_per_s")
    if off and on:
        fields.update({
            "webhooks_off_changes_per_s": off, "webhooks_on_changes_per_s": on, "webhooks_ratio": f"{on / off:.3f}",
            "webhooks_cpu_ratio": f"{median('on', 'cpu_s_per_1000_changes') / median('off', 'cpu_s_per_1000_changes'):.3f}",
            "webhooks_delivered": median("on", "webhooks_delivered"),
        })
    off, on = median("off", "changes_per_s", "android"), median("on", "changes_per_s", "android")
    if off and on:
        cpu_off = median("off", "cpu_s_per_1000_changes", "android")
        cpu_on = median("on", "cpu_s_per_1000_changes", "android")
        fields.update({
            "android_off_changes_per_s": off, "android_on_changes_per_s": on, "android_ratio": f"{on / off:.3f}",
            "android_cpu_ratio": f"{cpu_on / cpu_off:.3f}", "android_pushes": median("on", "pushes", "android"),
            "ios_pushes": median("off", "pushes", "android"),
        })
    for mode in ("full", "normal", "full_stored", "normal_stored"):
        ours, theirs = results.get(f"deliveryd_log_{mode}"), results.get(f"peer_log_{mode}")
        if ours and theirs:
            fields[f"{mode}_changes_ratio"] = f"{ours['changes_per_s'] / max(1, theirs['changes_per_s']):.2f}"
            fields[f"{mode}_cpu_ratio"] = \
                f"{theirs['cpu_s_per_1000_changes'] / max(0.001, ours['cpu_s_per_1000_changes']):.2f}"
    ours, theirs = results.get("deliveryd_log_full"), results.get("peer_log_normal")
    if ours and theirs:
        fields["defaults_changes_ratio"] = f"{ours['changes_per_s'] / max(1, theirs['changes_per_s']):.2f}"
    print(" ".join(f"{key}={value}" for key, value in fields.items() if value is not None))


if __name__ == "__main__":
    main()
