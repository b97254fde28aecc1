"""``cd tests && python -m hub_server``: serve the test Hub on 127.0.0.1 until interrupted."""

import threading

from . import HubServer

if __name__ == "__main__":
    server = HubServer().start()
    print(f"HF_ENDPOINT={server.url}  (storage: {server.root}); Ctrl-C to stop", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()
