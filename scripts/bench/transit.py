"""Drives one Transit server for scripts/bench/transit.sh and prints its figures.

    transit.py URL PID LABEL REQUESTS BATCHES

One keep-alive HTTP/1.1 connection (root token `root`, key `bench`, made
first): REQUESTS encryptions of 1 KiB, then BATCHES batches of 100 1-KiB
items (none when BATCHES is 0). For each phase: requests (items) per second
of wall time, and the server's CPU (user + system, /proc/PID/stat) per
request (item). Every answer is checked (status 200, a `vault:v` ciphertext per item). Last, the server's
peak RSS (VmHWM). Prints one line per figure, `LABEL figure value unit`.
"""

import base64
import http.client
import json
import os
import sys
import time
import urllib.parse

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15; [0] here is field 3.
    return (int(fields[11]) + int(fields[12])) / TICKS


def peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM")


def main() -> None:
    url, pid, label = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    requests, batches = int(sys.argv[4]), int(sys.argv[5])
    parsed = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=60)
    headers = {"X-Vault-Token": "root", "Content-Type": "application/json"}

    def post(path: str, body: dict) -> dict:
        conn.request("POST", "/v1/" + path, json.dumps(body), headers)
        answer = conn.getresponse()
        data = answer.read()
        if answer.status != 200:
            raise RuntimeError(f"{label} {path}: {answer.status} {data[:200]!r}")
        return json.loads(data)

    post("transit/keys/bench", {})
    plain = base64.b64encode(os.urandom(1024)).decode()
    for _ in range(20):  # warm-up, not counted
        post("transit/encrypt/bench", {"plaintext": plain})

    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    for _ in range(requests):
        out = post("transit/encrypt/bench", {"plaintext": plain})
        assert out["data"]["ciphertext"].startswith("vault:v1:"), out
    wall, cpu = time.monotonic() - t0, cpu_seconds(pid) - cpu0
    print(f"{label} encrypt_1k_requests_per_s {requests / wall:.0f} req/s")
    print(f"{label} encrypt_1k_cpu_per_request {cpu / requests * 1e6:.1f} us")

    if batches:
        items = [{"plaintext": plain} for _ in range(100)]
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        for _ in range(batches):
            out = post("transit/encrypt/bench", {"batch_input": items})
            results = out["data"]["batch_results"]
            assert len(results) == 100 and all(
                r["ciphertext"].startswith("vault:v1:") for r in results
            ), out
        wall, cpu = time.monotonic() - t0, cpu_seconds(pid) - cpu0
        n = batches * 100
        print(f"{label} batch100_items_per_s {n / wall:.0f} items/s")
        print(f"{label} batch100_cpu_per_item {cpu / n * 1e6:.1f} us")
    print(f"{label} peak_rss {peak_rss_kib(pid) / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
