"""What the Python benchmark drivers share: free ports, waiting for a listener, throwaway certificates."""
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(port, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port}")


def certificates(directory):
    """A provider signing key (signing.pem/.pub), a CA (ca.pem) and a server certificate for 127.0.0.1."""
    script = """
    set -e
    openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out signing.pem
    openssl pkey -in signing.pem -pubout -out signing.pub
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem \
        -days 1 -subj /CN=bench-ca
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key -out server.csr \
        -subj /CN=127.0.0.1
    printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 1 \
        -extfile san.ext
    """
    subprocess.run(["bash", "-c", script], cwd=directory, check=True, capture_output=True)
