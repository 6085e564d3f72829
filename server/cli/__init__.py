"""The server's commands (`hwnas serve`, `hwnas token`, `hwnas demo`), reached by name from
hwnas.cli; nothing in the server imports them."""
