# relay.py LISTEN_PORT TARGET_IP TARGET_PORT OUTFILE: forwards one TCP
# connection and logs every read as "c HEX" (from the client) or "s HEX"
# (from the server), "EOF" at a close (interop/perftest/record.sh).
import select
import socket
import sys

lp, tip, tp, out = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("0.0.0.0", lp)); ls.listen(1)
c, _ = ls.accept()
s = socket.create_connection((tip, tp))
for x in (c, s): x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
log = open(out, "w")
open_ = {c: True, s: True}
while any(open_.values()):
    r, _, _ = select.select([x for x in open_ if open_[x]], [], [], 60)
    if not r: break
    for x in r:
        try: d = x.recv(65536)
        except OSError: d = b""
        other = s if x is c else c
        tag = "c" if x is c else "s"
        if not d:
            log.write(f"{tag} EOF\n"); open_[x] = False
            try: other.shutdown(socket.SHUT_WR)
            except OSError: pass
            continue
        log.write(f"{tag} {d.hex()}\n"); log.flush()
        try: other.sendall(d)
        except OSError: pass
log.close()
