"""Benchmarks: each module with a `main` is a script that measures something and its
baseline in the same run (docs/benchmarks.md says what each found). Run one as a file or as a
module, `.venv/bin/python bench/load.py` or `.venv/bin/python -m bench.load`: the editable
install makes `bench` importable from either.

Shared pieces live in modules of their own, never in another script's private names: the
machine a run was on (`bench.machine`), the replayed device (`bench.replay`, `bench.replay_agent`);
servers, agents, tokens, PostgreSQL and synthetic measurements come from hwnas.testing.

Run as a file, a script's folder comes first on the import path, so no module here may be
named like a package it imports (`proxies`, `search`, `server`, `agent`, `archvocab`, `hwnas`).
"""
