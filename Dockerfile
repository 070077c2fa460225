# syntax=docker/dockerfile:1
#
# coding-agent images. Two targets:
#   full (the default): the static binary on Debian with git (the task
#         workspaces need it), Node.js and npm, the npm MCP servers of
#         deploy/mcp installed at their locked versions (mcp-server-filesystem
#         on PATH) and tini as PID 1;
#   static: the binary alone on a distroless base, for configurations with
#         no task-scoped MCP server (no workspace, so no git) and no npm server.
#
#   docker build -t coding-agent .
#   docker build --target static -t coding-agent:static .
#   docker build --build-arg VERSION=v1.2.0 --build-arg COMMIT=$(git rev-parse HEAD) -t coding-agent .
#
# The model's commands run in the sandbox with what the image holds: full has
# git and Node.js (node, npm, npx) and no other language. Extend it with the
# toolchains your repositories need, e.g.
#   FROM coding-agent
#   USER 0
#   RUN apt-get update && apt-get install -y --no-install-recommends python3 \
#    && rm -rf /var/lib/apt/lists/*
#   USER 10001
# The sandbox's default level (namespaces) needs the container options that
# compose.yaml sets (see the README's "Deploying with the sandbox").
#
# Both run as the unprivileged user coding-agent (uid 10001) in
# /var/lib/coding-agent (state, workspaces, logs: mount a volume there) and
# read /etc/coding-agent/config.yaml. Secrets come from the environment or
# from files (github.token_file, …): none is built into an image.

ARG GO_VERSION=1.26
ARG NODE_VERSION=20

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd ./cmd
COPY internal ./internal
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/coding-agent ./cmd/coding-agent \
 && /out/coding-agent version
# The directories the runtime images start with, owned by the service's user.
RUN mkdir -p /out/root/var/lib/coding-agent /out/root/etc/coding-agent \
 && chown -R 10001:10001 /out/root/var/lib/coding-agent

FROM gcr.io/distroless/static-debian12:nonroot AS static
COPY --from=build /out/coding-agent /usr/local/bin/coding-agent
COPY --from=build --chown=10001:10001 /out/root/var/lib/coding-agent /var/lib/coding-agent
USER 10001:10001
WORKDIR /var/lib/coding-agent
ENV HOME=/var/lib/coding-agent
VOLUME ["/var/lib/coding-agent"]
# serve's listener for a config from init (server.listen: ${SERVER_LISTEN}):
# /healthz, /readyz, /metrics and the webhooks; the health check probes it.
ENV SERVER_LISTEN=0.0.0.0:8080
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/coding-agent", "health", "--config", "/etc/coding-agent/config.yaml"]
ENTRYPOINT ["/usr/local/bin/coding-agent"]
CMD ["serve", "--config", "/etc/coding-agent/config.yaml"]

FROM node:${NODE_VERSION}-bookworm-slim AS full
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 coding-agent \
 && useradd --system --uid 10001 --gid coding-agent --home-dir /var/lib/coding-agent --shell /usr/sbin/nologin coding-agent \
 && node --version && npm --version && git --version
# The npm MCP servers, at the versions the lock pins (the ones the tests run),
# installed now: a config names their commands (mcp-server-filesystem …) and
# nothing is fetched when a task starts.
COPY deploy/mcp/package.json deploy/mcp/package-lock.json /opt/coding-agent/mcp/
RUN npm ci --prefix /opt/coding-agent/mcp --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force \
 && ln -s /opt/coding-agent/mcp/node_modules/.bin/mcp-server-filesystem /usr/local/bin/mcp-server-filesystem
COPY --from=build /out/coding-agent /usr/local/bin/coding-agent
COPY --from=build --chown=10001:10001 /out/root/var/lib/coding-agent /var/lib/coding-agent
USER coding-agent
WORKDIR /var/lib/coding-agent
ENV HOME=/var/lib/coding-agent \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_FUND=false
VOLUME ["/var/lib/coding-agent"]
# serve's listener for a config from init (server.listen: ${SERVER_LISTEN}):
# /healthz, /readyz, /metrics and the webhooks; the health check probes it.
ENV SERVER_LISTEN=0.0.0.0:8080
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/coding-agent", "health", "--config", "/etc/coding-agent/config.yaml"]
# tini reaps the MCP servers' orphaned children and passes SIGTERM on: the task
# in hand then stops at its next checkpoint (shutdown_grace_seconds, default 5,
# under Docker's 10 s; compose.yaml gives 30 s).
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/coding-agent"]
CMD ["serve", "--config", "/etc/coding-agent/config.yaml"]
