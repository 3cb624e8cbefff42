"""The embedded engine's HTTP front end (FastAPI + uvicorn): ``app`` builds and runs it."""
