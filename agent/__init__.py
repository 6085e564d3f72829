"""hwnas agent: a small worker that measures candidate architectures on this device.

Poll -> claim -> build -> measure -> report. Imports only archvocab, torch (in the measuring
child process), httpx, numpy and the standard library.

Modules: `measure` (measure a spec in a fresh process, typed failures), `launch` (the
forkserver that makes a fresh process cheap), `child` and `preload` (what runs in it),
`in_process` (torch timing and memory), `onnx_backend` (export, and ONNX Runtime timing without
torch), `protocol` (warm-up and CI-of-median stopping), `memory`, `weights` (cheap realistic
initialisation), `provenance` and `hostinfo` (conditions of a measurement), `fingerprint`,
`client` (the HTTP API over an injected httpx.Client), `worker` (the job loop), `cli`
(`hwnas agent`).
"""
