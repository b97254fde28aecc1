# `psp serve` on CPU: a slim Python image with the package and its `serve` extra, run by a user without root, with a
# health check on /health. Build and run (docs/serve.md, "In a container"):
#
#   docker build -t psp-serve .
#   docker run --rm -p 8080:8080 -v /path/to/model:/model:ro -e PSP_SERVE_MODEL=/model psp-serve
#   docker run --rm -p 8080:8080 -e PSP_SERVE_API_KEY=secret psp-serve user/p-sp-en   # a Hub model, with a key
#
# Every option of `psp serve` is also an environment variable (PSP_SERVE_PORT, PSP_SERVE_MAX_INPUTS, ...).

# Stage 1: the wheel, with its C kernels compiled (the compiler stays in this stage).
FROM python:3.11-slim-bookworm AS build
RUN apt-get update \
    && apt-get install --yes --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /build
COPY pyproject.toml setup.py README.md ./
COPY src ./src
COPY modeling ./modeling
COPY hub_cards ./hub_cards
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# Stage 2: what runs. No compiler, no build files, no root.
FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
RUN wheel="$(ls /wheels/psp_hf-*.whl)" \
    && pip install --no-cache-dir "${wheel}[serve]" \
    && rm -rf /wheels
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin psp
USER psp
WORKDIR /home/psp
# Listen on every interface inside the container (the host decides what reaches it with -p); Hub downloads are
# cached in the user's home (mount a volume there to keep them between runs).
ENV PSP_SERVE_HOST=0.0.0.0 \
    PSP_SERVE_PORT=8080 \
    HF_HOME=/home/psp/.cache/huggingface
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ['PSP_SERVE_PORT'] + '/health', timeout=4)"]
ENTRYPOINT ["psp", "serve"]
