"""hwnas agent: a small worker that measures candidate architectures on this device.

Poll -> claim -> build -> measure -> report. Imports only archvocab, torch (in the measuring
child process), httpx, numpy and the standard library.

Modules: `measure` (measure a spec in a child process, typed failures), `in_process` (the
timing and memory code the child runs), `fingerprint`, `client` (the HTTP API over an
injected httpx.Client), `worker` (the job loop), `cli` (`hwnas agent`).
"""
