"""The `hwnas` command line: the composition root that dispatches to each role.

It imports a role's code only when that role's command runs, so an edge device with only the
agent extra installed can run `hwnas agent` without FastAPI, SQLAlchemy or pymoo.
"""
