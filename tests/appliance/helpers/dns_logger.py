"""A tiny DNS responder for the appliance tests (runs in a peer container the test started).

Every query name is printed to stdout (``QUERY <name>``), so a test can prove which names
the appliance's proxy did or did not try to resolve. Names ending in ``.example`` get an A
record pointing at the address given as argv[1] (``loopback.*`` names: 127.0.0.1, for the
rebinding test); everything else gets NXDOMAIN.
"""

import socket
import struct
import sys


def _name(packet: bytes, offset: int) -> tuple[str, int]:
    labels = []
    while packet[offset]:
        length = packet[offset]
        labels.append(packet[offset + 1 : offset + 1 + length].decode("ascii", "replace"))
        offset += 1 + length
    return ".".join(labels), offset + 1


def main() -> None:
    peer_ip = socket.inet_aton(sys.argv[1])
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", 53))
    print("READY", flush=True)
    while True:
        packet, peer = sock.recvfrom(2048)
        if len(packet) < 12:
            continue
        name, end = _name(packet, 12)
        qtype = struct.unpack(">H", packet[end : end + 2])[0]
        print("QUERY", name.lower(), qtype, flush=True)
        question = packet[12 : end + 4]
        answer_ip = socket.inet_aton("127.0.0.1") if name.lower().startswith("loopback.") else peer_ip
        if name.lower().endswith(".example") and qtype == 1:
            header = packet[:2] + b"\x81\x80" + struct.pack(">HHHH", 1, 1, 0, 0)
            rr = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 5, 4) + answer_ip
            sock.sendto(header + question + rr, peer)
        else:
            rcode = b"\x81\x83" if qtype == 1 or not name.lower().endswith(".example") else b"\x81\x80"
            sock.sendto(packet[:2] + rcode + struct.pack(">HHHH", 1, 0, 0, 0) + question, peer)


if __name__ == "__main__":
    main()
