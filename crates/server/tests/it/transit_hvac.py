"""hvac (PyPI) against aesd's Transit data endpoints.

Run by crates/server/tests/it/transit_api.rs with the venv's python:
    transit_hvac.py http://127.0.0.1:PORT WORKDIR
(aesd --dev --dev-root-token-id root). Prints "hvac: all checks passed"
and exits 0, or fails on the first check that does not hold.
"""

import base64
import os
import subprocess
import sys

import hvac
import hvac.exceptions


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def expect(exception, call, says):
    try:
        call()
    except exception as err:
        assert says in str(err), f"{exception.__name__} without {says!r}: {err}"
        return
    raise AssertionError(f"no {exception.__name__} ({says})")


def main() -> None:
    url, work = sys.argv[1], sys.argv[2]
    client = hvac.Client(url=url, token="root")
    transit = client.secrets.transit

    # encrypt makes the key; decrypt gives the plaintext back.
    made = transit.encrypt_data(name="hv", plaintext=b64(b"hello hvac"))
    ciphertext = made["data"]["ciphertext"]
    assert ciphertext.startswith("vault:v1:"), made
    opened = transit.decrypt_data(name="hv", ciphertext=ciphertext)
    assert base64.b64decode(opened["data"]["plaintext"]) == b"hello hvac", opened

    # Associated data binds: without it the ciphertext does not open.
    bound = transit.encrypt_data(
        name="hv", plaintext=b64(b"bound"), associated_data=b64(b"ctx")
    )["data"]["ciphertext"]
    expect(
        hvac.exceptions.InvalidRequest,
        lambda: transit.decrypt_data(name="hv", ciphertext=bound),
        "message authentication failed",
    )
    opened = transit.decrypt_data(
        name="hv", ciphertext=bound, associated_data=b64(b"ctx")
    )
    assert base64.b64decode(opened["data"]["plaintext"]) == b"bound", opened

    # Rotation, then rewrap to the new version.
    transit.rotate_key(name="hv")
    rewrapped = transit.rewrap_data(name="hv", ciphertext=ciphertext)["data"]
    assert rewrapped["ciphertext"].startswith("vault:v2:"), rewrapped
    assert rewrapped["key_version"] == 2, rewrapped

    # Batches keep order and references.
    items = [{"plaintext": b64(bytes([i]) * i), "reference": f"r{i}"} for i in range(5)]
    results = transit.encrypt_data(name="hv", batch_input=items)["data"]["batch_results"]
    assert [r["reference"] for r in results] == [f"r{i}" for i in range(5)], results
    back = transit.decrypt_data(
        name="hv",
        batch_input=[{"ciphertext": r["ciphertext"], "reference": r["reference"]} for r in results],
    )["data"]["batch_results"]
    for i, item in enumerate(back):
        assert base64.b64decode(item["plaintext"]) == bytes([i]) * i, back
    expect(
        hvac.exceptions.InvalidRequest,
        lambda: transit.encrypt_data(
            name="hv", batch_input=[{"plaintext": "!!"}, {"plaintext": b64(b"x")}]
        ),
        "illegal base64",
    )

    # A data key: the plaintext form encrypts a file locally; the wrapped
    # form, decrypted by aesd, gives the key that opens it again.
    data_key = transit.generate_data_key(name="hv", key_type="plaintext")["data"]
    key = base64.b64decode(data_key["plaintext"])
    assert len(key) == 32, data_key
    iv = os.urandom(16).hex()
    plain = os.path.join(work, "file.txt")
    sealed = os.path.join(work, "file.enc")
    opened_path = os.path.join(work, "file.out")
    with open(plain, "wb") as f:
        f.write(os.urandom(100_000))
    openssl = ["openssl", "enc", "-aes-256-cbc", "-iv", iv]
    subprocess.run(openssl + ["-K", key.hex(), "-in", plain, "-out", sealed], check=True)
    del key
    recovered = transit.decrypt_data(name="hv", ciphertext=data_key["ciphertext"])
    key = base64.b64decode(recovered["data"]["plaintext"])
    subprocess.run(
        openssl + ["-d", "-K", key.hex(), "-in", sealed, "-out", opened_path], check=True
    )
    with open(plain, "rb") as a, open(opened_path, "rb") as b:
        assert a.read() == b.read(), "the file did not come back"
    wrapped = transit.generate_data_key(name="hv", key_type="wrapped", bits=512)["data"]
    assert "plaintext" not in wrapped, wrapped
    unwrapped = transit.decrypt_data(name="hv", ciphertext=wrapped["ciphertext"])
    assert len(base64.b64decode(unwrapped["data"]["plaintext"])) == 64, unwrapped

    # Random bytes, and refusals as hvac's exceptions.
    random = transit.generate_random_bytes(n_bytes=16, output_format="hex")["data"]
    assert len(random["random_bytes"]) == 32, random
    expect(
        hvac.exceptions.InvalidRequest,
        lambda: transit.decrypt_data(name="nokey", ciphertext=ciphertext),
        "encryption key not found",
    )
    stranger = hvac.Client(url=url, token="not-a-token")
    expect(
        hvac.exceptions.Forbidden,
        lambda: stranger.secrets.transit.encrypt_data(name="hv", plaintext=b64(b"x")),
        "permission denied",
    )
    print("hvac: all checks passed")


if __name__ == "__main__":
    main()
