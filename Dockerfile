# One image for every role; the EXTRAS build arg picks what gets installed:
#   docker build --build-arg EXTRAS=server -t hwnas-server .   (search server: no torch)
#   docker build --build-arg EXTRAS=agent  -t hwnas-agent .    (device agent: torch, no FastAPI)
#   docker build -t hwnas .                                     (everything)
FROM python:3.11-slim

ARG EXTRAS=all
# constraints.txt pins torch; the CPU wheel index serves that version without CUDA libraries.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

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
RUN pip install --extra-index-url "${TORCH_INDEX_URL}" -c constraints.txt ".[${EXTRAS}]"

# Run unprivileged; /data holds the server's SQLite file (mount a volume there).
RUN useradd --create-home --uid 10001 hwnas && mkdir /data && chown hwnas /data
USER hwnas
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8000

# No ENTRYPOINT: a container's command is the whole `hwnas ...` command line.
CMD ["hwnas", "--help"]
