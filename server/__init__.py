"""The hwnas server: FastAPI routes -> services -> SQLAlchemy store. The only wiring place."""
