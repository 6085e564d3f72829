# Sourced by the scripts that run on a lent machine (the `device` tool's GPU hosts). That machine
# has Python, PyTorch and CUDA but not hwnas's other packages or PostgreSQL, and no network: the
# caller carries them as wheels in .whl/ (see each script's header). This installs them where
# the imports find them, runs from the source tree, and adds the `postgres` user that
# hwnas.testing.postgres runs PostgreSQL as when root (PostgreSQL refuses root).
if [ -d .whl ] && ! python3 -c "import fastapi, optuna" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:$PWD
    export PATH=/tmp/site/pgserver/pginstall/bin:$PATH
fi
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin postgres
fi
export PYTHONUNBUFFERED=1
