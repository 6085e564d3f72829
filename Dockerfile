# One Dockerfile, a stage per role; docker-compose.yml builds each role's image by its target:
#   docker build --target server -t hwnas-server .   (search server: no torch)
#   docker build --target agent  -t hwnas-agent .    (device agent: torch, no FastAPI)
#   docker build -t hwnas .                           (the last stage, `all`: everything)
# Each stage installs its role's extra; the EXTRAS build arg replaces it, e.g.
#   docker build --target server --build-arg EXTRAS=server,postgres -t hwnas-server-pg .
# On an ARM board (Raspberry Pi 5) the same file builds natively: python:3.11-slim is
# multi-arch, and the CPU wheel index serves aarch64 torch (docs/devices.md; not tried here).
FROM python:3.11-slim AS base

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY archvocab ./archvocab
COPY search ./search
COPY proxies ./proxies
COPY server ./server
COPY agent ./agent
COPY hwnas ./hwnas

# Run unprivileged; /data holds the server's SQLite file (mount a volume there).
RUN useradd --create-home --uid 10001 hwnas && mkdir /data && chown hwnas /data


# The search server: FastAPI, SQLAlchemy, the strategies and the dashboard; no torch.
FROM base AS server
ARG EXTRAS=server
RUN pip install -c constraints.txt ".[${EXTRAS}]"
USER hwnas
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8000
# No ENTRYPOINT: a container's command is the whole `hwnas ...` command line.
CMD ["hwnas", "serve", "--host", "0.0.0.0", "--port", "8000", "--db", "sqlite:////data/hwnas.db"]


# The device agent: the vocabulary, the HTTP client, torch and ONNX Runtime; no FastAPI.
FROM base AS agent
ARG EXTRAS=agent
# constraints.txt pins torch; the CPU wheel index serves that version without CUDA libraries.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
RUN pip install --extra-index-url "${TORCH_INDEX_URL}" -c constraints.txt ".[${EXTRAS}]"
USER hwnas
WORKDIR /home/hwnas
# The agent needs --server and --device-class (and $HWNAS_AGENT_TOKEN): compose gives them.
CMD ["hwnas", "agent", "--help"]


# Everything (every role's extra): `docker build -t hwnas .`
FROM base AS all
ARG EXTRAS=all
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
RUN pip install --extra-index-url "${TORCH_INDEX_URL}" -c constraints.txt ".[${EXTRAS}]"
USER hwnas
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8000
CMD ["hwnas", "--help"]
