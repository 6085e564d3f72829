"""The harness for tests and benchmarks: real servers, agents and databases, started the way
a deployment starts them (as django.test and starlette.testclient serve their users' tests).

- `ports`: a free loopback port, and a server's base URL on it.
- `processes`: `Processes`, the named child processes of one run, each logging to a file.
- `servers`: `hwnas serve` over a SQLite file or a PostgreSQL URL, healthy before it returns;
  its tokens (`hwnas token create`); an HTTP client for it.
- `agents`: `hwnas agent` processes enrolled with the server's token.
- `postgres`: a throwaway PostgreSQL cluster, a fresh database per test.
- `measurements`: a synthetic device's deterministic measurements.

Nothing here is imported with `hwnas`, and nothing here imports the server, the agent or the
search libraries: a server is a process started through its command line, so the harness
runs wherever the `hwnas` command does.
"""
