"""The application: `factory.create_app(settings)` assembles the api, the middleware (one per
module in middleware/), error translation, /healthz and /metrics. Never imports the cli."""
