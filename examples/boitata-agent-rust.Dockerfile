# The sandbox image with Boitata's agent inside: the base image plus the host-built
# `boitata-agent` binary, run as the unprivileged user `agent`, who owns /workspace.
#
#   scripts/build-base-image.sh                       # boitata-base:bookworm
#   cargo build --release -p boitata-agent            # target/release/boitata-agent
#   docker build -f examples/boitata-agent-rust.Dockerfile -t boitata-agent-rust:latest .
#
# or `scripts/build-agent-image.sh`, which does all three and sends only the binary as
# the build context. The repository's .dockerignore keeps the context of the plain
# command down to the binary too.
#
# No secret goes into this image: the agent gets its run secret and the provider's
# API key in the environment of the one process that starts it (see docs/acp.md).
#
# Build arguments:
#   BASE       the image to build on (a Debian 12 / glibc one: the binary is built on
#              the host); default boitata-base:bookworm
#   AGENT_BIN  the binary, relative to the build context; default
#              target/release/boitata-agent
ARG BASE=boitata-base:bookworm
FROM ${BASE}

ARG AGENT_BIN=target/release/boitata-agent

# The user the sandbox's commands and the agent run as. Sandboxes drop every
# capability anyway; a non-root user also keeps the agent's own binary and the
# system files out of reach of what it runs.
RUN useradd --create-home --uid 1000 --user-group --shell /bin/sh agent \
 && mkdir -p /workspace \
 && chown agent:agent /workspace

COPY ${AGENT_BIN} /usr/local/bin/boitata-agent

USER agent
WORKDIR /workspace
ENV HOME=/home/agent
# A sandbox is thrown away after its run: Python's bytecode caches would only litter
# the checkout, and one written in the same second as a same-size edit goes stale.
ENV PYTHONDONTWRITEBYTECODE=1
# The port `agent_sandbox` expects the agent on (published on host loopback only).
EXPOSE 7700
CMD ["boitata-agent", "--addr", "0.0.0.0:7700", "--workspace", "/workspace"]
