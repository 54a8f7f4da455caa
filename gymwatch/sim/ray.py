"""A stand-in for Ray's gcs_server: started in its own session, it escapes gym's process group
(as the real one does) and lives until killed. Only the run marker finds it."""

import signal
import sys
import time

if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # like the real one, it ignores ^C
    sys.stdout.close()
    while True:
        time.sleep(3600)
