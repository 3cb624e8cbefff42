"""A launchable stand-in for a server at one draft depth (tune's launch-template tests).

    python depth_server.py --port P --k K [--schedule JSON] --record FILE

Serves a scripted server (``specgauge.testing.scripted_server``) until it is terminated: k=0
sends 12 tokens one per 20 ms chunk, any k > 0 (or a schedule) the same 12 tokens in 4 chunks
— clearly faster, so the tune chooses k > 0. Appends its arguments and pid as one JSON line to
FILE, so a test can see which commands were launched.
"""

import argparse
import json
import os
import signal

from specgauge.testing.scripted_server import Script, ScriptedServer

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--k", type=int, required=True)
parser.add_argument("--schedule")
parser.add_argument("--record", required=True)
args = parser.parse_args()
with open(args.record, "a") as record:
    record.write(json.dumps({"k": args.k, "schedule": json.loads(args.schedule) if args.schedule else None,
                             "pid": os.getpid()}) + "\n")
fast = args.k > 0 or args.schedule is not None
script = (Script(chunk_delay_s=0.02, num_chunks=4, tokens_per_chunk=3) if fast
          else Script(chunk_delay_s=0.02, num_chunks=12))
with ScriptedServer(script, port=args.port):
    signal.pause()
