"""Running the model's Python (`run_python`) with no network and nothing of the host.

Each run is a child process of its own under one of two engines (bwrap.py: bubblewrap
namespaces; wasi.py: CPython compiled to WebAssembly under wasmtime), sees only its
chat's folder (folders.py), and the files it writes under out/ leave through the one
door once (tool.py).
"""
